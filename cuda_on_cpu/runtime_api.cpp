// The CUDA runtime functions kernels/cuda/ calls (cuda_runtime_api.h declares them), on the CPU
// implementation's device (device_state.h). Copies follow CUDA's rules for pageable and pinned
// host memory: with pageable memory a copy waits for its stream and is done when the call
// returns; with registered (pinned) memory, and between device buffers, it is queued on the
// stream like a kernel. A copy, memset or free whose range is not where the caller says it is
// (outside every device allocation, or past an allocation's end) is cudaErrorInvalidValue.
// The calls that queue device work or wait for it are counted as activity.h defines.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "device_state.h"

using namespace cuda_on_cpu;

namespace {

// The calls that touch the device return the sticky error of a fault, as a lost GPU context's do.
#define CUDA_ON_CPU_ENTER                                  \
  const std::lock_guard lock(device_mutex());              \
  if (sticky_error() != cudaSuccess) return record(sticky_error())

bool in_device_memory(const void* address, size_t bytes) {
  const Allocation* allocation = find_allocation(address, bytes);
  return allocation != nullptr && allocation->kind == MemoryKind::kDevice;
}

// Host memory, or not: an address inside a device allocation whose range runs past its end is
// neither host nor device memory, but a bad argument.
bool overruns_device_memory(const void* address, size_t bytes) {
  const Allocation* start = find_allocation(address, 1);
  return start != nullptr && start->kind == MemoryKind::kDevice && !in_device_memory(address, bytes);
}

bool pinned(const void* host, size_t bytes) {
  const Allocation* allocation = find_allocation(host, bytes);
  return allocation != nullptr && allocation->kind == MemoryKind::kPinnedHost;
}

bool kind_fits(cudaMemcpyKind kind, bool dst_device, bool src_device) {
  switch (kind) {
    case cudaMemcpyHostToHost: return !dst_device && !src_device;
    case cudaMemcpyHostToDevice: return dst_device && !src_device;
    case cudaMemcpyDeviceToHost: return !dst_device && src_device;
    case cudaMemcpyDeviceToDevice: return dst_device && src_device;
    case cudaMemcpyDefault: return true;
  }
  return false;
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  const std::lock_guard lock(device_mutex());
  *count = visible_device_count();
  return record(*count == 0 ? cudaErrorNoDevice : cudaSuccess);
}

cudaError_t cudaSetDevice(int device) {
  CUDA_ON_CPU_ENTER;
  if (device < 0 || device >= visible_device_count()) return record(cudaErrorInvalidDevice);
  current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  CUDA_ON_CPU_ENTER;
  *device = current_device();
  return cudaSuccess;
}

// A Hopper-shaped device whose name says what it is, so that no table of real GPUs matches it.
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  CUDA_ON_CPU_ENTER;
  if (device < 0 || device >= visible_device_count()) return record(cudaErrorInvalidDevice);
  const int physical = physical_device(device);
  *properties = cudaDeviceProp{};
  std::snprintf(properties->name, sizeof(properties->name), "CUDA on CPU (trainctl's CPU implementation) GPU %d",
                physical);
  // "GPU-c0c0c0c0-0000-..." with the machine's index in the last bytes, as nvidia-smi shows UUIDs.
  std::memset(properties->uuid.bytes, 0xc0, 4);
  properties->uuid.bytes[15] = static_cast<char>(physical);
  properties->pciBusID = physical;
  properties->totalGlobalMem = device_memory_bytes();
  properties->sharedMemPerBlock = kDefaultMaxDynamicShared;
  properties->sharedMemPerBlockOptin = kMaxDynamicSharedOptIn;
  properties->sharedMemPerMultiprocessor = 228 << 10;
  properties->reservedSharedMemPerBlock = 1 << 10;
  properties->warpSize = 32;
  properties->maxThreadsPerBlock = 1024;
  properties->maxThreadsDim[0] = properties->maxThreadsDim[1] = 1024;
  properties->maxThreadsDim[2] = 64;
  properties->maxGridSize[0] = 0x7FFFFFFF;
  properties->maxGridSize[1] = properties->maxGridSize[2] = 65535;
  properties->major = 9;
  properties->minor = 0;
  properties->multiProcessorCount = 132;
  properties->unifiedAddressing = 1;
  return cudaSuccess;
}

// Only the attribute kernels here set: how much dynamic shared memory the kernel's launches may ask
// for, up to the device's opt-in limit (cudaErrorInvalidValue above it, as the driver answers).
cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attribute, int value) {
  CUDA_ON_CPU_ENTER;
  if (kernel == nullptr) return record(cudaErrorInvalidDeviceFunction);
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return record(cudaErrorNotSupported);
  if (value < 0 || static_cast<size_t>(value) > kMaxDynamicSharedOptIn) return record(cudaErrorInvalidValue);
  set_max_dynamic_shared(kernel, static_cast<size_t>(value));
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  CUDA_ON_CPU_ENTER;
  *pointer = nullptr;
  if (bytes == 0) return cudaSuccess;
  *pointer = allocate_device(bytes);
  return record(*pointer != nullptr ? cudaSuccess : cudaErrorMemoryAllocation);
}

// Every device's allocations count against the current one: the process uses one device.
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  CUDA_ON_CPU_ENTER;
  *total = device_memory_bytes();
  *free = *total - std::min(device_bytes_held(), *total);
  return cudaSuccess;
}

// cudaFree waits for the whole device first, as CUDA's does.
cudaError_t cudaFree(void* pointer) {
  CUDA_ON_CPU_ENTER;
  if (pointer == nullptr) return cudaSuccess;
  drain_all();
  if (sticky_error() != cudaSuccess) return record(sticky_error());
  return record(release_device(pointer) ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  CUDA_ON_CPU_ENTER;
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr || overruns_device_memory(dst, bytes) || overruns_device_memory(src, bytes))
    return record(cudaErrorInvalidValue);
  const bool dst_device = in_device_memory(dst, bytes), src_device = in_device_memory(src, bytes);
  if (!kind_fits(kind, dst_device, src_device)) return record(cudaErrorInvalidValue);
  const bool host_side_pageable = (!dst_device && !pinned(dst, bytes)) || (!src_device && !pinned(src, bytes));
  if (host_side_pageable) {
    count_wait(queue->last_queued_is_upload());
    drain(queue);
    if (sticky_error() != cudaSuccess) return record(sticky_error());
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
  }
  enqueue(queue, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  if (dst_device && src_device) {
    log_queued(queue, "copy", {dst, src});
    ++counts().kernel_launches;
  } else if (dst_device) {
    queue->upload_end = queue->enqueued;
  }
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* device, int value, size_t bytes, cudaStream_t stream) {
  CUDA_ON_CPU_ENTER;
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!in_device_memory(device, bytes)) return record(cudaErrorInvalidValue);
  enqueue(queue, [device, value, bytes] { std::memset(device, value, bytes); });
  log_queued(queue, "memset", {device});
  ++counts().kernel_launches;
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* host, size_t bytes, unsigned int flags) {
  CUDA_ON_CPU_ENTER;
  if ((flags & ~(cudaHostRegisterPortable | cudaHostRegisterMapped)) != 0) return record(cudaErrorInvalidValue);
  return record(register_host(host, bytes));
}

cudaError_t cudaHostUnregister(void* host) {
  CUDA_ON_CPU_ENTER;
  return record(unregister_host(host));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  CUDA_ON_CPU_ENTER;
  if ((flags & ~cudaStreamNonBlocking) != 0) return record(cudaErrorInvalidValue);
  *stream = create_stream((flags & cudaStreamNonBlocking) == 0);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  CUDA_ON_CPU_ENTER;
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr || stream == nullptr || stream == cudaStreamLegacy) return record(cudaErrorInvalidResourceHandle);
  destroy_stream(queue);
  return record(sticky_error());
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  CUDA_ON_CPU_ENTER;
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr) return record(cudaErrorInvalidResourceHandle);
  count_wait(queue->last_queued_is_upload());
  drain(queue);
  return record(sticky_error());
}

cudaError_t cudaDeviceSynchronize() {
  CUDA_ON_CPU_ENTER;
  count_wait(false);
  drain_all();
  return record(sticky_error());
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  CUDA_ON_CPU_ENTER;
  if ((flags & ~(cudaEventDisableTiming | cudaEventBlockingSync)) != 0) return record(cudaErrorInvalidValue);
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  CUDA_ON_CPU_ENTER;
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr || event == nullptr) return record(cudaErrorInvalidResourceHandle);
  record_event(event, queue);
  return cudaSuccess;
}

// The wait refers to the event's state now, as CUDA's does: recording it again later changes
// nothing for work queued before.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  CUDA_ON_CPU_ENTER;
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr || event == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (flags != 0) return record(cudaErrorInvalidValue);
  if (event->stream == nullptr || event->stream == queue) return cudaSuccess;
  enqueue(queue, [awaited = event->stream, position = event->position] {
    // A stream destroyed since had all its work done first.
    if (is_live(awaited)) drain_to(awaited, position);
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  CUDA_ON_CPU_ENTER;
  if (event == nullptr) return record(cudaErrorInvalidResourceHandle);
  count_wait(event->stream != nullptr && event->after_upload);
  if (event->stream != nullptr) drain_to(event->stream, event->position);
  return record(sticky_error());
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  CUDA_ON_CPU_ENTER;
  if (event == nullptr) return record(cudaErrorInvalidResourceHandle);
  forget_event(event);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const std::lock_guard lock(device_mutex());
  return take_last_error();
}

cudaError_t cudaPeekAtLastError() {
  const std::lock_guard lock(device_mutex());
  const cudaError_t error = take_last_error();
  record(error);
  return error;
}

namespace {

struct ErrorText {
  cudaError_t error;
  const char* name;
  const char* description;
};

// The errors the CPU implementation returns, with CUDA's own names and descriptions.
constexpr ErrorText kErrorTexts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress", "misaligned address"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
};

const ErrorText* text_of(cudaError_t error) {
  for (const ErrorText& text : kErrorTexts)
    if (text.error == error) return &text;
  return nullptr;
}

}  // namespace

const char* cudaGetErrorName(cudaError_t error) {
  const ErrorText* text = text_of(error);
  return text != nullptr ? text->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  const ErrorText* text = text_of(error);
  return text != nullptr ? text->description : "unrecognized error code";
}

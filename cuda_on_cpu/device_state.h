// The CPU implementation's device: its memory (host memory, each allocation recorded so that
// copies, kernel arguments and cuBLASLt operands can be checked against it), its streams (queues
// of work that run only when something waits for them, so that work ordered on the wrong stream
// shows as a wrong result), events, errors (the sticky kind a faulting kernel leaves behind), the
// kernels' allowances of dynamic shared memory, and the counts of what it did (activity.h).
// One lock guards all of it (every caller holds device_mutex()); whoever drains a stream runs
// its work while holding it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_on_cpu/activity.h"

// The toolkit only declares the handles' structs; these are the CPU implementation's.
struct CUstream_st {
  int id = 0;  // the queue log's name for it: the legacy default stream is 0, the others count up
  // Synchronizes with the legacy default stream (streams created without cudaStreamNonBlocking).
  bool blocking = false;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0;  // work items ever queued
  uint64_t executed = 0;  // of which done
  bool executing = false;
  // `enqueued` just after the latest host-to-device copy was queued; 0: none yet.
  uint64_t upload_end = 0;
  bool last_queued_is_upload() const { return upload_end != 0 && upload_end == enqueued; }
};

struct CUevent_st {
  CUstream_st* stream = nullptr;  // null: never recorded, or its stream is gone (complete)
  uint64_t position = 0;          // complete once the stream has executed this many items
  bool after_upload = false;      // the item before `position` is a host-to-device copy
};

namespace cuda_on_cpu {

std::recursive_mutex& device_mutex();

// --- memory -------------------------------------------------------------------------------
enum class MemoryKind { kDevice, kPinnedHost };

struct Allocation {
  const char* base;
  size_t bytes;
  MemoryKind kind;
  uint64_t id;  // the queue log's name for it: allocations count up from 1
};

// The allocation that holds [address, address + bytes), or null. With bytes == 0 an address one
// past the end counts as inside (an empty range, or a pointer a kernel may never dereference).
const Allocation* find_allocation(const void* address, size_t bytes);
// Null where the device's memory cannot hold `bytes` more.
void* allocate_device(size_t bytes);
// Each device's memory (cudaDeviceProp::totalGlobalMem): TRAINCTL_CUDA_ON_CPU_MEMORY_MIB MiB, by
// default an H100's 80 GiB; and what cudaMalloc holds of it now: cudaMemGetInfo's free memory is
// the difference. Host memory backs it, but an allocation past it fails as on a GPU
// (allocate_device returns null), so that a test can show what does not fit a GPU of that size.
size_t device_memory_bytes();
size_t device_bytes_held();
// Returns false when `pointer` is not an allocation's base.
bool release_device(void* pointer);
cudaError_t register_host(void* host, size_t bytes);
cudaError_t unregister_host(void* host);

// --- kernels' shared memory ------------------------------------------------------------------
// The dynamic shared memory a launch may ask for (compute capability 9.0, an H100's or H200's):
// 48 KiB, or up to 227 KiB where the kernel opted in (cudaFuncAttributeMaxDynamicSharedMemorySize).
constexpr size_t kDefaultMaxDynamicShared = 48 << 10;
constexpr size_t kMaxDynamicSharedOptIn = 232448;
// What the launches of `kernel` may ask for: kDefaultMaxDynamicShared, or what its attribute says.
size_t max_dynamic_shared(const void* kernel);
void set_max_dynamic_shared(const void* kernel, size_t bytes);

// --- devices: the fake GPUs CUDA_VISIBLE_DEVICES names ----------------------------------------
// The visible devices: as many as CUDA_VISIBLE_DEVICES lists (each entry an index below the
// machine's TRAINCTL_CUDA_ON_CPU_GPUS, default 8), all of them when it is unset.
int visible_device_count();
// The machine's index of visible device `device` (the entry of CUDA_VISIBLE_DEVICES).
int physical_device(int device);
int& current_device();

// --- errors ---------------------------------------------------------------------------------
// cudaSuccess, or the error a fault left: every later call returns it, as a GPU context's does.
cudaError_t sticky_error();
// Records a fault: prints `why` and makes `error` sticky; queued work is dropped.
void fault(cudaError_t error, const std::string& why);
// Sets the calling thread's last error (cudaGetLastError) when `error` is one, and returns it.
cudaError_t record(cudaError_t error);
cudaError_t take_last_error();

// --- streams --------------------------------------------------------------------------------
// The stream a handle names: null and cudaStreamLegacy are the legacy default stream; null for a
// handle that is not a live stream.
CUstream_st* resolve(cudaStream_t stream);
CUstream_st* create_stream(bool blocking);
bool is_live(const CUstream_st* stream);
void destroy_stream(CUstream_st* stream);
// Queues `work` on `stream` after what is queued there, and, as CUDA orders them, after the
// work queued so far on the streams the legacy default stream synchronizes with.
void enqueue(CUstream_st* stream, std::function<void()> work);
// Runs `stream`'s work up to `position` items (what it waits for first).
void drain_to(CUstream_st* stream, uint64_t position);
void drain(CUstream_st* stream);
void drain_all();
void record_event(CUevent_st* event, CUstream_st* stream);
void forget_event(CUevent_st* event);

// --- activity (activity.h) -----------------------------------------------------------------
// The counts, for the calls that do what they count to add to them.
Activity& counts();
// The host waits for device work: an upload wait when what it waits for last is a
// host-to-device copy, else a host sync.
void count_wait(bool after_upload);
// The queue log (activity.h), where TRAINCTL_CUDA_ON_CPU_QUEUE_LOG names one: work of `kind`
// ("kernel", "matmul", "copy", "memset", or a collective's NCCL name) queued on or, for a
// collective, run on behalf of `stream`, with the allocations its pointers fall in.
void log_queued(const CUstream_st* stream, const char* kind, const std::vector<const void*>& pointers);

// Code, for reports: "function (file:line)" where addr2line finds debug information, else the
// library and the offset in it. A return address names the call before it.
enum class CodeAddress { kFunction, kReturnAddress };
std::string describe_code(const void* address, CodeAddress kind);

}  // namespace cuda_on_cpu

// The CUDA memory, info and streams families: binding a rank to its GPU (and releasing what the
// table keeps for itself), device memory and its peak use, copies ordered on a stream, the
// conversion between f32 and bf16 (its kernel among the elementwise ones), page-locked host
// memory, streams of the caller's own, the GPU's peak FLOP/s from a table of known products, its
// free memory, and what the device has done where the CPU implementation of CUDA counts it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "cuda/cuda_check.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_scratch.h"

// Built against cuda_on_cpu/ (kernels/meson.build defines it), which counts what the device does.
#ifdef TRAINCTL_CUDA_ON_CPU
#include <cuda_on_cpu/activity.h>
#endif

namespace trainctl::cuda_kernels {

namespace {

std::string visible_devices() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible != nullptr ? fmt::format("CUDA_VISIBLE_DEVICES=\"{}\"", visible) : "CUDA_VISIBLE_DEVICES unset";
}

// Peaks from NVIDIA's datasheets: dense (not 2:4 sparse) tensor-core bf16, and fp32 without
// TF32 (what gemm computes, CUBLAS_COMPUTE_32F); by compute capability and a part of the name the
// GPU reports (the capability keeps "A100" from matching an RTX A1000). The first matching row
// decides. This is a table of products, not a measurement: a GPU it does not list gives 0
// (unknown). The PCIe and NVL Hopper boards run at lower clocks than the SXM ones, so they must
// not match the SXM rows.
struct PeakFlops {
  int major, minor;
  std::string_view name_part;
  double bf16, fp32;
};
constexpr PeakFlops kPeakFlops[] = {
    {9, 0, "H100 PCIe", 0.0, 0.0},
    {9, 0, "H100 NVL", 0.0, 0.0},
    {9, 0, "H200 NVL", 0.0, 0.0},
    {9, 0, "H100", 989e12, 67e12},    // SXM5
    {9, 0, "H200", 989e12, 67e12},    // SXM5
    {8, 0, "A100", 312e12, 19.5e12},  // SXM4 and PCIe alike
};

// The sizes of alloc's live allocations, for peak_allocated_bytes. Allocations are few (the
// model's buffers at start, checkpoint staging at the first save), so a lock that makes alloc and
// release safe from any thread costs nothing.
struct AllocationLedger {
  std::mutex mutex;
  std::unordered_map<void*, size_t> sizes;
  size_t live_bytes = 0;
  size_t peak_bytes = 0;
};

// Never destroyed: buffers may still be released by other objects' destructors at exit.
AllocationLedger& ledger() {
  static AllocationLedger* const instance = new AllocationLedger;
  return *instance;
}

void forget_allocation(void* pointer) {
  AllocationLedger& book = ledger();
  const std::lock_guard lock(book.mutex);
  const auto found = book.sizes.find(pointer);
  if (found == book.sizes.end()) return;
  book.live_bytes -= found->second;
  book.sizes.erase(found);
}

// "NVIDIA H100 80GB HBM3 (visible GPU 1 of CUDA_VISIBLE_DEVICES="0,1", PCI 0000:1b:00.0,
// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)": what tells this rank's GPU from its neighbours'.
std::string describe_device(int device) {
  cudaDeviceProp properties{};
  CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  std::string uuid = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uuid += '-';
    uuid += fmt::format("{:02x}", static_cast<unsigned char>(properties.uuid.bytes[i]));
  }
  return fmt::format("{} (visible GPU {} of {}, PCI {:04x}:{:02x}:{:02x}.0, {})", properties.name, device,
                     visible_devices(), properties.pciDomainID, properties.pciBusID, properties.pciDeviceID, uuid);
}

}  // namespace

std::string bind_local(int local_rank, int local_size) {
  int count = 0;
  // Not CUDA_CHECK: no usable GPU is a fact about this machine (DeviceUnavailable, bad input for
  // the run), not a failed call.
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    throw DeviceUnavailable(fmt::format("no usable CUDA device: cudaGetDeviceCount failed with {} ({}); {}",
                                        cudaGetErrorName(status), cudaGetErrorString(status), visible_devices()));
  if (count == 0) throw DeviceUnavailable(fmt::format("no CUDA device visible; {}", visible_devices()));
  if (count < local_size)
    throw DeviceUnavailable(fmt::format("{} ranks on this node but only {} GPUs visible ({}); each rank needs a GPU",
                                        local_size, count, visible_devices()));
  CUDA_CHECK(cudaSetDevice(local_rank));
  return describe_device(local_rank);
}

void unbind() {
  release_all_scratch();
  release_gemm_plans();
}

Stream create_stream() {
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream{stream};
}

// The stream's work is done before its scratch goes: a new stream may get the same handle.
void destroy_stream(Stream stream) {
  const cudaStream_t cuda = cuda_stream(stream);
  CUDA_CHECK(cudaStreamSynchronize(cuda));
  release_scratch(cuda);
  CUDA_CHECK(cudaStreamDestroy(cuda));
}

void* alloc(size_t bytes) {
  void* pointer = nullptr;
  CUDA_CHECK(cudaMalloc(&pointer, bytes));
  AllocationLedger& book = ledger();
  const std::lock_guard lock(book.mutex);
  book.sizes.emplace(pointer, bytes);
  book.live_bytes += bytes;
  book.peak_bytes = std::max(book.peak_bytes, book.live_bytes);
  return pointer;
}

int64_t peak_allocated_bytes() {
  AllocationLedger& book = ledger();
  const std::lock_guard lock(book.mutex);
  return static_cast<int64_t>(book.peak_bytes);
}

// release and unpin_host run in destructors, also while a CheckFailure unwinds the stack. After a
// device fault every later call fails too; reporting that again would throw out of a destructor
// during unwinding and terminate before the first failure is reported, so it is dropped there.
void release(void* pointer) {
  forget_allocation(pointer);
  if (std::uncaught_exceptions() > 0) {
    static_cast<void>(cudaFree(pointer));
    return;
  }
  CUDA_CHECK(cudaFree(pointer));
}

namespace {

// Host memory that pin_host registered: copies to and from it are queued on their stream, where
// those to and from pageable memory are not.
struct PinnedRanges {
  std::mutex mutex;
  std::map<const std::byte*, size_t> sizes;

  bool contains(const void* pointer, size_t bytes) {
    const auto* begin = static_cast<const std::byte*>(pointer);
    const std::lock_guard lock(mutex);
    auto after = sizes.upper_bound(begin);
    if (after == sizes.begin()) return false;
    --after;
    return begin + bytes <= after->first + after->second;
  }
};

PinnedRanges& pinned_ranges() {
  static auto* const ranges = new PinnedRanges;
  return *ranges;
}

}  // namespace

// Complete when it returns, so the caller may reuse its buffer. From pinned memory: the copy
// queued, then a wait for the stream. From pageable memory: staged through pinned buffers and only
// queued (UploadStaging), which the caller cannot tell from a finished copy, or, when larger than
// the staging takes, cudaMemcpyAsync, which waits for the stream and returns once it has copied
// the caller's bytes to its own staging.
void upload(Stream stream, void* device_dst, const void* host_src, size_t bytes) {
  const cudaStream_t cuda = cuda_stream(stream);
  if (pinned_ranges().contains(host_src, bytes)) {
    CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, cuda));
    CUDA_CHECK(cudaStreamSynchronize(cuda));
  } else if (bytes <= UploadStaging::kMaxBytes) {
    scratch_of(cuda).uploads.stage(cuda, device_dst, host_src, bytes);
  } else {
    CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, cuda));
  }
}

// Complete when it returns: one wait for the stream. To pageable memory cudaMemcpyAsync itself
// waits and returns once the copy is done; to pinned memory it is queued, and waited for.
void download(Stream stream, void* host_dst, const void* device_src, size_t bytes) {
  const cudaStream_t cuda = cuda_stream(stream);
  CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, cuda));
  if (pinned_ranges().contains(host_dst, bytes)) CUDA_CHECK(cudaStreamSynchronize(cuda));
}

// Device to device: ordered on the stream like a kernel, and like one not waited for.
void copy(Stream stream, void* device_dst, const void* device_src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, cuda_stream(stream)));
}

// All-zero bytes are 0 in every element type.
void fill_zero(Stream stream, void* device_dst, size_t bytes) {
  CUDA_CHECK(cudaMemsetAsync(device_dst, 0, bytes, cuda_stream(stream)));
}

void convert(Stream stream, TypedPtr dst, ConstTypedPtr src, int64_t n) {
  if (dst.type == src.type)
    copy(stream, dst.data, src.data, static_cast<size_t>(n) * element_bytes(dst.type));
  else
    convert_elements(cuda_stream(stream), dst, src, n);
}

void pin_host(void* host, size_t bytes) {
  CUDA_CHECK(cudaHostRegister(host, bytes, cudaHostRegisterDefault));
  PinnedRanges& ranges = pinned_ranges();
  const std::lock_guard lock(ranges.mutex);
  ranges.sizes[static_cast<const std::byte*>(host)] = bytes;
}

void unpin_host(void* host) {
  {
    PinnedRanges& ranges = pinned_ranges();
    const std::lock_guard lock(ranges.mutex);
    ranges.sizes.erase(static_cast<const std::byte*>(host));
  }
  if (std::uncaught_exceptions() > 0) {
    static_cast<void>(cudaHostUnregister(host));
    return;
  }
  CUDA_CHECK(cudaHostUnregister(host));
}

double peak_flops(bool bf16) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  const std::string_view name = properties.name;
  for (const PeakFlops& row : kPeakFlops)
    if (properties.major == row.major && properties.minor == row.minor &&
        name.find(row.name_part) != std::string_view::npos)
      return bf16 ? row.bf16 : row.fp32;
  return 0.0;
}

std::optional<int64_t> free_memory_bytes() {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}

std::optional<DeviceActivity> activity() {
#ifdef TRAINCTL_CUDA_ON_CPU
  const cuda_on_cpu::Activity counted = cuda_on_cpu::activity();
  return DeviceActivity{.kernel_launches = counted.kernel_launches,
                        .blas_calls = counted.blas_calls,
                        .host_syncs = counted.host_syncs,
                        .upload_waits = counted.upload_waits,
                        .peak_device_bytes = counted.peak_device_bytes};
#else
  return std::nullopt;
#endif
}

}  // namespace trainctl::cuda_kernels

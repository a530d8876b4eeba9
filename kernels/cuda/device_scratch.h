// DeviceScratch: device memory that an op reuses from call to call (cuBLASLt's workspace and bias
// gradients, partial sums of reductions), grown to the largest size asked for; and StreamScratch,
// one set of them per stream, so that ops ordered on different streams never share scratch and may
// run at the same time. Scratch lives until the stream is destroyed through the table
// (destroy_stream) or the table is unbound (unbind), never into the exit, where cudaFree may find
// the CUDA runtime already gone.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <map>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cuda_ops.h"

namespace trainctl::cuda_kernels {

// The ops are called from the one thread that drives the device, so scratch needs no lock.
class DeviceScratch {
 public:
  // zero_when_grown: new memory starts as zero bytes (counters that kernels reset after use).
  explicit DeviceScratch(bool zero_when_grown = false) : zero_when_grown_(zero_when_grown) {}
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  // release (cudaFree) waits for the device, so no kernel still in flight uses the memory.
  ~DeviceScratch() {
    if (data_ != nullptr) release(data_);
  }

  // At least `bytes` bytes for work ordered on `stream`; what an earlier call left there is lost
  // when it grows. The zeroing is ordered before the work that follows on `stream`. Through
  // alloc and release, so that the peak device memory of the metrics counts scratch too.
  template <typename T = void>
  T* get(size_t bytes, cudaStream_t stream) {
    if (bytes > capacity_) {
      if (data_ != nullptr) release(data_);
      data_ = nullptr;
      capacity_ = 0;
      data_ = alloc(bytes);
      if (zero_when_grown_) CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes, stream));
      capacity_ = bytes;
    }
    return static_cast<T*>(data_);
  }

 private:
  bool zero_when_grown_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Page-locked host buffers that an upload from pageable memory is staged through, in turn: the
// caller's bytes are copied into one here, and the copy to the device is queued on the stream from
// it, so the host goes on at once (the caller's buffer is free again) while the copy waits its turn
// behind the stream's work. A buffer is refilled only once its previous copy has landed (its
// event); with kSlots of them, an upload waits for the copy kSlots uploads before it, which was
// queued before the work of that step, not after it. Uploads over kMaxBytes go unstaged.
class UploadStaging {
 public:
  static constexpr int kSlots = 4;
  static constexpr size_t kMaxBytes = size_t{64} << 20;

  UploadStaging() = default;
  UploadStaging(const UploadStaging&) = delete;
  UploadStaging& operator=(const UploadStaging&) = delete;
  // Each copy has landed before its buffer is unregistered and freed.
  ~UploadStaging() {
    for (Slot& slot : slots_) {
      if (slot.event == nullptr) continue;
      static_cast<void>(cudaEventSynchronize(slot.event));
      static_cast<void>(cudaEventDestroy(slot.event));
      static_cast<void>(cudaHostUnregister(slot.bytes.data()));
    }
  }

  // Queues the copy of host_src's `bytes` (at most kMaxBytes) to device_dst on `stream`.
  void stage(cudaStream_t stream, void* device_dst, const void* host_src, size_t bytes) {
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % kSlots;
    if (slot.event != nullptr) CUDA_CHECK(cudaEventSynchronize(slot.event));
    if (slot.bytes.size() < bytes) {
      if (slot.event != nullptr) CUDA_CHECK(cudaHostUnregister(slot.bytes.data()));
      slot.bytes.resize(bytes);
      CUDA_CHECK(cudaHostRegister(slot.bytes.data(), bytes, cudaHostRegisterDefault));
      if (slot.event == nullptr) CUDA_CHECK(cudaEventCreateWithFlags(&slot.event, cudaEventDisableTiming));
    }
    std::memcpy(slot.bytes.data(), host_src, bytes);
    CUDA_CHECK(cudaMemcpyAsync(device_dst, slot.bytes.data(), bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaEventRecord(slot.event, stream));
  }

 private:
  struct Slot {
    std::vector<std::byte> bytes;
    cudaEvent_t event = nullptr;  // recorded after the slot's last copy
  };
  Slot slots_[kSlots];
  int next_ = 0;
};

// The scratch of the ops ordered on one stream: ops on one stream run one after another, so one
// of each serves them all.
struct StreamScratch {
  // Partial results of a reduction's blocks.
  DeviceScratch reduction_partials;
  // The reductions' block counters, zero between launches.
  DeviceScratch block_counters{/*zero_when_grown=*/true};
  // What one kernel of an op leaves for the next: layernorm_backward's row means, the chains of
  // equal tokens of embedding_backward.
  DeviceScratch intermediates;
  DeviceScratch gemm_workspace;
  // The bias gradient a GEMM's epilogue writes, before it is added to the gradient.
  DeviceScratch bias_gradient;
  UploadStaging uploads;
};

// Every stream's scratch by handle; the map itself is never destroyed, so that no cudaFree runs
// at exit.
inline std::map<cudaStream_t, StreamScratch>& stream_scratch() {
  static auto* const scratch = new std::map<cudaStream_t, StreamScratch>;
  return *scratch;
}

// A stream's scratch, made on its first use.
inline StreamScratch& scratch_of(cudaStream_t stream) { return stream_scratch()[stream]; }

// A stream's scratch, once the stream's work is done and before CUDA may hand its handle to a
// new stream.
inline void release_scratch(cudaStream_t stream) { stream_scratch().erase(stream); }
inline void release_all_scratch() { stream_scratch().clear(); }

}  // namespace trainctl::cuda_kernels

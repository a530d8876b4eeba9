// DeviceScratch: device memory that an op reuses from call to call (bf16 copies of GEMM operands,
// cuBLASLt's workspace, partial sums of reductions), grown to the largest size asked for.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/cuda_check.h"

namespace trainctl::cuda_kernels {

// The ops are called from the one thread that drives the device, so scratch needs no lock. The
// owners are function-local statics that are never freed: a destructor would run cudaFree at exit,
// after the CUDA runtime may have shut down, and the driver reclaims the memory with the process.
class DeviceScratch {
 public:
  // zero_when_grown: new memory starts as zero bytes (counters that kernels reset after use).
  explicit DeviceScratch(bool zero_when_grown = false) : zero_when_grown_(zero_when_grown) {}
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // At least `bytes` bytes; what an earlier call left there is lost when it grows. cudaFree waits
  // for the device, so no kernel still in flight uses the old memory.
  template <typename T = void>
  T* get(size_t bytes) {
    if (bytes > capacity_) {
      if (data_ != nullptr) CUDA_CHECK(cudaFree(data_));
      data_ = nullptr;
      capacity_ = 0;
      CUDA_CHECK(cudaMalloc(&data_, bytes));
      if (zero_when_grown_) CUDA_CHECK(cudaMemsetAsync(data_, 0, bytes, 0));
      capacity_ = bytes;
    }
    return static_cast<T*>(data_);
  }

 private:
  bool zero_when_grown_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace trainctl::cuda_kernels

// What the CUDA kernels share: launch shapes, grid-stride indexing, and the deterministic
// reductions (fixed-order warp and block sums; the last block of a grid combining every block's
// partial result), which make each op give bitwise the same result on every run, and the way of
// their results back to the host.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/cuda_check.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_scratch.h"

namespace trainctl::cuda_kernels {

constexpr int kWarpSize = 32;
constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / kWarpSize;
// Enough blocks of kBlockThreads to fill an H200 (132 SMs x 2048 threads) in one wave. Grids
// depend on the problem size alone, never on the GPU, so a reduction adds in the same order on
// any GPU and any run.
constexpr int64_t kMaxBlocks = 1024;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of kBlockThreads for a grid-stride loop over n elements (n > 0).
inline unsigned int blocks_for(int64_t n) {
  return static_cast<unsigned int>(std::min(ceil_div(n, kBlockThreads), kMaxBlocks));
}

__device__ inline int64_t grid_thread_index() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ inline int64_t grid_thread_count() { return gridDim.x * int64_t{blockDim.x}; }

// Launches kernel(args...) with blocks_for(n) blocks on `stream`; nothing to do for n == 0 (a
// grid of no blocks is a launch error).
template <typename... Params, typename... Args>
void launch_over(cudaStream_t stream, int64_t n, void (*kernel)(Params...), Args... args) {
  if (n == 0) return;
  kernel<<<blocks_for(n), kBlockThreads, 0, stream>>>(static_cast<Params>(args)...);
  CUDA_CHECK(cudaGetLastError());
}

// Sum over the warp by an xor butterfly: every lane ends with the same bits, since each pairwise
// sum is the same in either order, and the pairing is fixed.
template <typename T>
__device__ T warp_sum(T value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Sum over a one-dimensional block of kBlockThreads threads, in a fixed order; every thread gets it.
template <typename T>
__device__ T block_sum(T value) {
  __shared__ T warp_sums[kBlockWarps];
  value = warp_sum(value);
  if (threadIdx.x % kWarpSize == 0) warp_sums[threadIdx.x / kWarpSize] = value;
  __syncthreads();
  T total = warp_sums[0];
  for (int warp = 1; warp < kBlockWarps; ++warp) total += warp_sums[warp];
  __syncthreads();  // warp_sums is free for the next call
  return total;
}

// Called by every thread of each of the `blocks` blocks of a grid after it stored its partial
// result: true, in all threads of the block, for the block that finished last. That block then
// combines every partial in a fixed order, so the result does not depend on which block it was;
// it reads the partials with __ldcg (from L2: L1 is not coherent between blocks). The counter
// starts at zero and is left at zero for the next launch.
__device__ inline bool finished_last(unsigned int* counter, unsigned int blocks) {
  __shared__ bool is_last;
  __threadfence();  // this thread's partial is visible device-wide before its block counts itself done
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    is_last = atomicAdd(counter, 1u) == blocks - 1;
    if (is_last) {
      *counter = 0;
      __threadfence();
    }
  }
  __syncthreads();
  return is_last;
}

// A reduction's result on the host, once the work before it on `stream` is done; waits for
// that stream only.
template <typename T>
T host_value(cudaStream_t stream, const T* device_value) {
  T value{};
  copy_and_wait(stream, &value, device_value, sizeof(T));
  return value;
}

}  // namespace trainctl::cuda_kernels

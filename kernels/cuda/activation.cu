// The CUDA bias + activation ops. The forward adds the bias and applies the activation; the
// backward multiplies by the activation's derivative and sums grad_bias over rows in the same
// kernel, deterministically (fixed-order sums per block, then the last block adds the blocks'
// sums in order: no float atomics). The arithmetic is the CPU reference's, operation for
// operation (and uncontracted: --fmad=false), so ReLU and the identity match it bitwise and GELU
// differs only by erff and expf, which are not correctly rounded on either side.
#include <algorithm>
#include <cstdint>

#include "cuda/kernel_common.cuh"
#include "cuda/ops_cuda.h"

namespace trainctl::cuda_kernels {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

struct Identity {
  __device__ static float forward(float z) { return z; }
  __device__ static float derivative(float, float) { return 1.0f; }
};
struct Relu {
  __device__ static float forward(float z) { return z > 0.0f ? z : 0.0f; }
  __device__ static float derivative(float z, float) { return z > 0.0f ? 1.0f : 0.0f; }
};
// The exact erf form: gelu(z) = z * cdf(z).
struct Gelu {
  __device__ static float forward(float z) { return 0.5f * z * (1.0f + erff(z * kInvSqrt2)); }
  // gelu'(z) = cdf(z) + z * pdf(z), with cdf(z) = out / z recovered from the forward's output;
  // cdf(0) = 0.5, where out / z has no value.
  __device__ static float derivative(float z, float out) {
    const float cdf = z != 0.0f ? out / z : 0.5f;
    return cdf + z * kInvSqrt2Pi * expf(-0.5f * z * z);
  }
};

template <typename Body>
void with_activation(Activation act, Body body) {
  switch (act) {
    case Activation::kRelu: body(Relu{}); break;
    case Activation::kGelu: body(Gelu{}); break;
    default: body(Identity{});
  }
}

template <typename Act>
__global__ void bias_act_forward_kernel(float* __restrict__ z, const float* __restrict__ bias,
                                        float* __restrict__ out, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    const float biased = z[i] + bias[i % cols];
    z[i] = biased;
    out[i] = Act::forward(biased);
  }
}

// The backward's blocks are 32 columns by 8 row lanes: each warp reads 32 consecutive floats of a
// row. A block covers kRowsPerBlock rows of its column tile, or more where that would make over
// kMaxRowBlocks per tile (the last block's sum over them grows) or kMaxBackwardBlocks in all
// (a few waves fill the GPU, and the partial sums stay under 1 MiB).
constexpr int kTileColumns = kWarpSize;
constexpr int kRowLanes = kBlockThreads / kTileColumns;
constexpr int64_t kRowsPerBlock = 64;
constexpr int64_t kMaxRowBlocks = 256;
constexpr int64_t kMaxBackwardBlocks = 4096;

// grad_z may be grad_out itself: each element is read before it is written, by the same thread.
// With one row block, the block adds its sums to grad_bias directly; with more, each stores its
// sums in partials[row_block][column] and the last block of each column tile adds them in order.
template <typename Act>
__global__ void bias_act_backward_kernel(const float* grad_out, const float* __restrict__ z,
                                         const float* __restrict__ out, float* grad_z, float* __restrict__ grad_bias,
                                         int64_t rows, int64_t cols, int64_t rows_per_block, float* partials,
                                         unsigned int* counters) {
  __shared__ float lane_sums[kRowLanes][kTileColumns];
  const int64_t column = blockIdx.x * int64_t{kTileColumns} + threadIdx.x;
  const int64_t first_row = blockIdx.y * rows_per_block;
  const int64_t end_row = first_row + rows_per_block < rows ? first_row + rows_per_block : rows;
  float sum = 0.0f;
  if (column < cols) {
    for (int64_t row = first_row + threadIdx.y; row < end_row; row += kRowLanes) {
      const int64_t i = row * cols + column;
      const float g = grad_out[i] * Act::derivative(z[i], out[i]);
      grad_z[i] = g;
      sum += g;
    }
  }
  // Sums the row lanes' sums of each column, in lane order; every thread of the column gets it.
  auto column_sum = [&](float lane_sum) {
    lane_sums[threadIdx.y][threadIdx.x] = lane_sum;
    __syncthreads();
    float total = lane_sums[0][threadIdx.x];
    for (int lane = 1; lane < kRowLanes; ++lane) total += lane_sums[lane][threadIdx.x];
    __syncthreads();
    return total;
  };
  const float block_sum_of_column = column_sum(sum);
  if (gridDim.y == 1) {
    if (threadIdx.y == 0 && column < cols) grad_bias[column] += block_sum_of_column;
    return;
  }
  if (threadIdx.y == 0 && column < cols) partials[blockIdx.y * cols + column] = block_sum_of_column;
  if (!finished_last(&counters[blockIdx.x], gridDim.y)) return;
  float partial_sum = 0.0f;
  if (column < cols)
    for (int64_t row_block = threadIdx.y; row_block < gridDim.y; row_block += kRowLanes)
      partial_sum += __ldcg(&partials[row_block * cols + column]);
  const float total = column_sum(partial_sum);
  if (threadIdx.y == 0 && column < cols) grad_bias[column] += total;
}

}  // namespace

void bias_act_forward(float* z, const float* bias, float* out, int64_t rows, int64_t cols, Activation act) {
  with_activation(act, [=](auto activation) {
    launch_over(rows * cols, bias_act_forward_kernel<decltype(activation)>, z, bias, out, rows, cols);
  });
}

void bias_act_backward(const float* grad_out, const float* z, const float* out, float* grad_z, float* grad_bias,
                       int64_t rows, int64_t cols, Activation act) {
  if (rows == 0 || cols == 0) return;
  const int64_t column_tiles = ceil_div(cols, kTileColumns);
  const int64_t row_blocks = std::min({ceil_div(rows, kRowsPerBlock), kMaxRowBlocks,
                                       std::max(int64_t{1}, kMaxBackwardBlocks / column_tiles)});
  const int64_t rows_per_block = ceil_div(rows, row_blocks);
  float* partials = nullptr;
  unsigned int* counters = nullptr;
  if (row_blocks > 1) {
    partials = reduction_partials().get<float>(static_cast<size_t>(row_blocks * cols) * sizeof(float));
    counters = block_counters().get<unsigned int>(static_cast<size_t>(column_tiles) * sizeof(unsigned int));
  }
  const dim3 grid(static_cast<unsigned int>(column_tiles), static_cast<unsigned int>(row_blocks));
  const dim3 block(kTileColumns, kRowLanes);
  with_activation(act, [=](auto activation) {
    bias_act_backward_kernel<decltype(activation)><<<grid, block, 0, 0>>>(
        grad_out, z, out, grad_z, grad_bias, rows, cols, rows_per_block, partials, counters);
    CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace trainctl::cuda_kernels

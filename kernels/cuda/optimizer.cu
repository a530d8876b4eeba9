// The CUDA optimizer family: the steps (PyTorch's SGD with momentum and AdamW) and the
// gradient-norm helpers (sum_squares, scale). The steps take their derived scalars as the CPU
// reference computes them (in double, rounded once to float) and repeat its float arithmetic
// operation for operation, with IEEE division and square root and no contraction into FMA
// (--fmad=false), so parameters and optimizer state match the CPU's bitwise. sum_squares adds in
// double, in a fixed order, and waits for its stream only.
#include <cmath>
#include <cstdint>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

__global__ void sgd_step_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                float* __restrict__ momentum_buffer, int64_t n, float lr, float momentum,
                                float weight_decay) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    const float g = grad[i] + weight_decay * param[i];
    const float buffer = momentum * momentum_buffer[i] + g;
    momentum_buffer[i] = buffer;
    param[i] -= lr * buffer;
  }
}

struct AdamwScalars {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
};

__global__ void adamw_step_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                  float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, int64_t n,
                                  AdamwScalars s) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    const float g = grad[i];
    const float decayed = param[i] * s.decay;
    const float average = s.beta1 * exp_avg[i] + s.one_minus_beta1 * g;
    const float average_sq = s.beta2 * exp_avg_sq[i] + s.one_minus_beta2 * g * g;
    exp_avg[i] = average;
    exp_avg_sq[i] = average_sq;
    const float denominator = sqrtf(average_sq) / s.bias_correction2_sqrt + s.eps;
    param[i] = decayed - s.step_size * average / denominator;
  }
}

// Each block sums its grid-stride share in double (float * float is exact in double), stores the
// block's sum, and the last block adds the blocks' sums in order.
__global__ void sum_squares_kernel(const float* __restrict__ x, int64_t n, double* __restrict__ block_sums,
                                   unsigned int* counter, double* __restrict__ total) {
  double sum = 0.0;
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) sum += static_cast<double>(x[i]) * x[i];
  sum = block_sum(sum);
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) *total = sum;
    return;
  }
  if (threadIdx.x == 0) block_sums[blockIdx.x] = sum;
  if (!finished_last(counter, gridDim.x)) return;
  double blocks_sum = 0.0;
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += kBlockThreads) blocks_sum += __ldcg(&block_sums[b]);
  blocks_sum = block_sum(blocks_sum);
  if (threadIdx.x == 0) *total = blocks_sum;
}

__global__ void scale_kernel(float* __restrict__ x, int64_t n, float factor) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) x[i] *= factor;
}

}  // namespace

void sgd_step(Stream stream, float* param, const float* grad, float* momentum_buffer, int64_t n, double lr,
              double momentum, double weight_decay) {
  launch_over(cuda_stream(stream), n, sgd_step_kernel, param, grad, momentum_buffer, n, static_cast<float>(lr),
              static_cast<float>(momentum), static_cast<float>(weight_decay));
}

void adamw_step(Stream stream, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step) {
  const AdamwScalars scalars{
      .decay = static_cast<float>(1.0 - lr * weight_decay),
      .beta1 = static_cast<float>(beta1),
      .one_minus_beta1 = static_cast<float>(1.0 - beta1),
      .beta2 = static_cast<float>(beta2),
      .one_minus_beta2 = static_cast<float>(1.0 - beta2),
      .step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, static_cast<double>(step)))),
      .bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)))),
      .eps = static_cast<float>(eps),
  };
  launch_over(cuda_stream(stream), n, adamw_step_kernel, param, grad, exp_avg, exp_avg_sq, n, scalars);
}

double sum_squares(Stream stream, const float* x, int64_t n) {
  if (n == 0) return 0.0;
  const cudaStream_t cuda = cuda_stream(stream);
  StreamScratch& scratch = scratch_of(cuda);
  const unsigned int blocks = blocks_for(n);
  auto* block_sums = scratch.reduction_partials.get<double>(blocks * sizeof(double), cuda);
  auto* counter = scratch.block_counters.get<unsigned int>(sizeof(unsigned int), cuda);
  auto* total = scratch.reduction_results.get<double>(sizeof(double), cuda);
  launch(cuda, blocks, kBlockThreads, sum_squares_kernel, x, n, block_sums, counter, total);
  return host_value(cuda, total);
}

void scale(Stream stream, float* x, int64_t n, float factor) {
  launch_over(cuda_stream(stream), n, scale_kernel, x, n, factor);
}

}  // namespace trainctl::cuda_kernels

// The CUDA optimizer family: the steps (PyTorch's SGD with momentum and AdamW) and the
// gradient-norm helpers (sum_squares, scale). Each is a grid-stride loop over its vectors, four
// floats at a time as float4s where every vector it touches starts 16-byte aligned (a parameter
// group may start at any float offset of the flat buffers), else one. The steps take their
// derived scalars as the CPU reference computes them (in double, rounded once to float) and
// repeat its float arithmetic operation for operation, with IEEE division and square root and no
// contraction into FMA (--fmad=false), so parameters and optimizer state match the CPU's bitwise.
// sum_squares adds in double, in a fixed order, and waits for its stream only.
#include <cmath>
#include <cstdint>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

template <int kWidth>
__global__ void sgd_step_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                float* __restrict__ momentum_buffer, int64_t n, float lr, float momentum,
                                float weight_decay) {
  for_each_pack<kWidth>(n, [=](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    const Floats<kPack> gradients = load_floats<kPack>(grad + i);
    Floats<kPack> p = load_floats<kPack>(param + i), buffer = load_floats<kPack>(momentum_buffer + i);
    for (int j = 0; j < kPack; ++j) {
      const float g = gradients.v[j] + weight_decay * p.v[j];
      buffer.v[j] = momentum * buffer.v[j] + g;
      p.v[j] -= lr * buffer.v[j];
    }
    store_floats<kPack>(momentum_buffer + i, buffer);
    store_floats<kPack>(param + i, p);
  });
}

struct AdamwScalars {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
};

template <int kWidth>
__global__ void adamw_step_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                  float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, int64_t n,
                                  AdamwScalars s) {
  for_each_pack<kWidth>(n, [=](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    const Floats<kPack> gradients = load_floats<kPack>(grad + i);
    Floats<kPack> p = load_floats<kPack>(param + i), average = load_floats<kPack>(exp_avg + i),
                  average_sq = load_floats<kPack>(exp_avg_sq + i);
    for (int j = 0; j < kPack; ++j) {
      const float g = gradients.v[j];
      const float decayed = p.v[j] * s.decay;
      average.v[j] = s.beta1 * average.v[j] + s.one_minus_beta1 * g;
      average_sq.v[j] = s.beta2 * average_sq.v[j] + s.one_minus_beta2 * g * g;
      const float denominator = sqrtf(average_sq.v[j]) / s.bias_correction2_sqrt + s.eps;
      p.v[j] = decayed - s.step_size * average.v[j] / denominator;
    }
    store_floats<kPack>(exp_avg + i, average);
    store_floats<kPack>(exp_avg_sq + i, average_sq);
    store_floats<kPack>(param + i, p);
  });
}

// Each block sums its grid-stride share in double (float * float is exact in double), each
// thread its packs' floats in order, stores the block's sum, and the last block adds the blocks'
// sums in order.
template <int kWidth>
__global__ void sum_squares_kernel(const float* __restrict__ x, int64_t n, double* __restrict__ block_sums,
                                   unsigned int* counter, double* __restrict__ total) {
  double sum = 0.0;
  for_each_pack<kWidth>(n, [&](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    const Floats<kPack> values = load_floats<kPack>(x + i);
    for (int j = 0; j < kPack; ++j) sum += static_cast<double>(values.v[j]) * values.v[j];
  });
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

template <int kWidth>
__global__ void scale_kernel(float* __restrict__ x, int64_t n, float factor) {
  for_each_pack<kWidth>(n, [=](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    Floats<kPack> values = load_floats<kPack>(x + i);
    for (int j = 0; j < kPack; ++j) values.v[j] *= factor;
    store_floats<kPack>(x + i, values);
  });
}

}  // namespace

void sgd_step(Stream stream, float* param, const float* grad, float* momentum_buffer, int64_t n, double lr,
              double momentum, double weight_decay) {
  with_pack_width({param, grad, momentum_buffer}, [=](auto width) {
    launch_over(cuda_stream(stream), ceil_div(n, width()), sgd_step_kernel<width()>, param, grad, momentum_buffer, n,
                static_cast<float>(lr), static_cast<float>(momentum), static_cast<float>(weight_decay));
  });
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
  with_pack_width({param, grad, exp_avg, exp_avg_sq}, [=](auto width) {
    launch_over(cuda_stream(stream), ceil_div(n, width()), adamw_step_kernel<width()>, param, grad, exp_avg,
                exp_avg_sq, n, scalars);
  });
}

double sum_squares(Stream stream, const float* x, int64_t n) {
  if (n == 0) return 0.0;
  const cudaStream_t cuda = cuda_stream(stream);
  StreamScratch& scratch = scratch_of(cuda);
  auto* counter = scratch.block_counters.get<unsigned int>(sizeof(unsigned int), cuda);
  auto* total = scratch.reduction_results.get<double>(sizeof(double), cuda);
  with_pack_width({x}, [&](auto width) {
    const unsigned int blocks = blocks_for(ceil_div(n, width()));
    auto* block_sums = scratch.reduction_partials.get<double>(blocks * sizeof(double), cuda);
    launch(cuda, blocks, kBlockThreads, sum_squares_kernel<width()>, x, n, block_sums, counter, total);
  });
  return host_value(cuda, total);
}

void scale(Stream stream, float* x, int64_t n, float factor) {
  with_pack_width({x}, [=](auto width) {
    launch_over(cuda_stream(stream), ceil_div(n, width()), scale_kernel<width()>, x, n, factor);
  });
}

}  // namespace trainctl::cuda_kernels

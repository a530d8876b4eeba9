// The CUDA norm family: LayerNorm over the last dimension, forward and backward, with the CPU
// reference's arithmetic (kernels/cpu/norm.cpp). A warp per row sums the row statistics in double
// (the forward's mean and variance of the centred values, in two passes; the backward's two row
// means), each lane its share of the columns in order and then a fixed xor butterfly, and rounds
// them to float once, as the CPU does; the elementwise work is the CPU's float formulas operation
// for operation (uncontracted: --fmad=false). So out, mean and rstd match the CPU bitwise except
// where the double sums' other order moves a float rounding (rare), and grad_x likewise. The
// backward's grad_weight and grad_bias are column sums over the call's rows (kernel_common.cuh's
// column-sum grid), formed in a fixed order and added to the gradients once: a second kernel
// goes over the matrix in column tiles, accumulating grad_x from the row means the first left in
// scratch and summing the columns' terms. Rows are read as float4s where the pointers and the row
// length allow, else one float at a time.
#include <cmath>
#include <cstdint>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

// A warp per row, kWidth columns per load. out = (x - mean) * rstd * weight + bias, saving mean
// and rstd; x is read three times (mean, variance, output), from L1 after the first.
template <int kWidth>
__global__ void layernorm_forward_kernel(float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                         const float* __restrict__ x, const float* __restrict__ weight,
                                         const float* __restrict__ bias, int64_t rows, int64_t cols, float eps) {
  const int lane = lane_index();
  const int64_t packs = cols / kWidth;
  const auto count = static_cast<double>(cols);
  for (int64_t r = grid_warp_index(); r < rows; r += grid_warp_count()) {
    const float* x_row = x + r * cols;
    double sum = 0.0;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(x_row + k * kWidth);
      for (int j = 0; j < kWidth; ++j) sum += static_cast<double>(values.v[j]);
    }
    const double row_mean = warp_sum(sum) / count;
    // Two passes: the variance of the centred values, with no cancellation.
    double squares = 0.0;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(x_row + k * kWidth);
      for (int j = 0; j < kWidth; ++j) {
        const double centred = values.v[j] - row_mean;
        squares += centred * centred;
      }
    }
    const double variance = warp_sum(squares) / count;
    // IEEE double square root and division, as std::sqrt and / on the CPU (not rsqrt).
    const auto row_mean_float = static_cast<float>(row_mean);
    const auto row_rstd = static_cast<float>(1.0 / sqrt(variance + eps));
    if (lane == 0) {
      mean[r] = row_mean_float;
      rstd[r] = row_rstd;
    }
    float* out_row = out + r * cols;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(x_row + k * kWidth);
      const Floats<kWidth> w = load_floats<kWidth>(weight + k * kWidth);
      const Floats<kWidth> b = load_floats<kWidth>(bias + k * kWidth);
      Floats<kWidth> result;
      for (int j = 0; j < kWidth; ++j) result.v[j] = (values.v[j] - row_mean_float) * row_rstd * w.v[j] + b.v[j];
      store_floats<kWidth>(out_row + k * kWidth, result);
    }
  }
}

// The backward's row means, each rounded to float once, as the CPU passes them on.
struct RowMeans {
  float grad_norm;             // mean(grad_out * weight)
  float grad_norm_times_norm;  // mean(grad_out * weight * norm)
};

// A warp per row: both means in one pass over grad_out, x and weight, summed in double.
template <int kWidth>
__global__ void layernorm_row_means_kernel(RowMeans* __restrict__ row_means, const float* grad_out,
                                           const float* __restrict__ x, const float* __restrict__ weight,
                                           const float* __restrict__ mean, const float* __restrict__ rstd, int64_t rows,
                                           int64_t cols) {
  const int lane = lane_index();
  const int64_t packs = cols / kWidth;
  const auto count = static_cast<double>(cols);
  for (int64_t r = grid_warp_index(); r < rows; r += grid_warp_count()) {
    const float* x_row = x + r * cols;
    const float* grad_out_row = grad_out + r * cols;
    const float row_mean = mean[r], row_rstd = rstd[r];
    double grad_norm_sum = 0.0, grad_norm_times_norm_sum = 0.0;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> g = load_floats<kWidth>(grad_out_row + k * kWidth);
      const Floats<kWidth> values = load_floats<kWidth>(x_row + k * kWidth);
      const Floats<kWidth> w = load_floats<kWidth>(weight + k * kWidth);
      for (int j = 0; j < kWidth; ++j) {
        const float grad_norm = g.v[j] * w.v[j];
        const float norm = (values.v[j] - row_mean) * row_rstd;
        grad_norm_sum += static_cast<double>(grad_norm);
        grad_norm_times_norm_sum += static_cast<double>(grad_norm) * norm;
      }
    }
    grad_norm_sum = warp_sum(grad_norm_sum);
    grad_norm_times_norm_sum = warp_sum(grad_norm_times_norm_sum);
    if (lane == 0)
      row_means[r] = {static_cast<float>(grad_norm_sum / count), static_cast<float>(grad_norm_times_norm_sum / count)};
  }
}

// The column-sum grid over [rows, cols]: grad_x += rstd * (grad_norm - mean(grad_norm) - norm *
// mean(grad_norm * norm)) element by element, and grad_weight and grad_bias take the column sums
// of grad_out * norm and of grad_out.
__global__ void layernorm_backward_kernel(float* grad_x, float* __restrict__ grad_weight, float* __restrict__ grad_bias,
                                          const float* grad_out, const float* __restrict__ x,
                                          const float* __restrict__ weight, const float* __restrict__ mean,
                                          const float* __restrict__ rstd, const RowMeans* __restrict__ row_means,
                                          ColumnSums shape) {
  sum_columns<2>(shape, {grad_weight, grad_bias}, [&](int64_t row, int64_t column, float (&weight_and_bias_sums)[2]) {
    const int64_t i = row * shape.cols + column;
    const float row_rstd = rstd[row];
    const RowMeans means = row_means[row];
    const float norm = (x[i] - mean[row]) * row_rstd;
    const float grad_norm = grad_out[i] * weight[column];
    weight_and_bias_sums[0] += grad_out[i] * norm;
    weight_and_bias_sums[1] += grad_out[i];
    grad_x[i] += (grad_norm - means.grad_norm - norm * means.grad_norm_times_norm) * row_rstd;
  });
}

}  // namespace

void layernorm_forward(Stream stream, float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, int64_t rows, int64_t cols, float eps) {
  if (rows == 0 || cols == 0) return;
  with_vector_width(cols, {out, x, weight, bias}, [&](auto width) {
    launch(cuda_stream(stream), blocks_for_rows(rows), kBlockThreads, layernorm_forward_kernel<width()>, out, mean,
           rstd, x, weight, bias, rows, cols, eps);
  });
}

void layernorm_backward(Stream stream, float* grad_x, float* grad_weight, float* grad_bias, const float* grad_out,
                        const float* x, const float* weight, const float* mean, const float* rstd, int64_t rows,
                        int64_t cols) {
  if (rows == 0 || cols == 0) return;
  const cudaStream_t cuda = cuda_stream(stream);
  auto* row_means = scratch_of(cuda).intermediates.get<RowMeans>(static_cast<size_t>(rows) * sizeof(RowMeans), cuda);
  with_vector_width(cols, {grad_out, x, weight}, [&](auto width) {
    launch(cuda, blocks_for_rows(rows), kBlockThreads, layernorm_row_means_kernel<width()>, row_means, grad_out, x,
           weight, mean, rstd, rows, cols);
  });
  const ColumnSumLaunch shape = column_sum_launch(cuda, rows, cols, 2);
  launch(cuda, shape.grid, shape.block, layernorm_backward_kernel, grad_x, grad_weight, grad_bias, grad_out, x, weight,
         mean, rstd, row_means, shape.sums);
}

}  // namespace trainctl::cuda_kernels

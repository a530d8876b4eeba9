// The CUDA norm family: LayerNorm and RMSNorm over the last dimension, forward (with the residual
// add before it fused in) and backward, with the CPU reference's arithmetic (kernels/cpu/norm.cpp):
// RMSNorm is LayerNorm without the centring and the bias (kCentred false), the same kernels with
// the mean taken as 0 and the bias's terms left out. The output,
// the residual's addend and the output gradient are f32 or bf16 (widened to float, and a bf16
// result rounded once), the residual stream and the rest float. A warp per row sums the row
// statistics in double (the forward's mean and variance of the centred values, in two passes; the
// backward's two row means), each lane its share of the columns in order and then a fixed xor
// butterfly, and rounds them to float once, as the CPU does; the elementwise work is the CPU's
// float formulas operation for operation (uncontracted: --fmad=false). So out, mean and rstd match
// the CPU bitwise except where the double sums' other order moves a float rounding (rare), and
// grad_x likewise. The backward's grad_weight and grad_bias are column sums over the call's rows
// (kernel_common.cuh's column-sum grid), formed in a fixed order and added to the gradients once: a
// second kernel goes over the matrix in column tiles, accumulating grad_x from the row means the
// first left in scratch and summing the columns' terms, and writing grad_x's copy in its own type
// where one is asked for. Rows are read four elements at a time (a float4, four bf16s) where the
// pointers and the row length allow, else one at a time.
#include <cmath>
#include <cstdint>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

// Elements per load of a row: a float4 of x, four elements of out or grad_out.
constexpr int kNormWidth = 4;

// A warp per row, kWidth columns per load. With `add`, sum = x + add is written first and stands
// for x from then on (each lane reads back what it wrote); out = (x - mean) * rstd * weight +
// bias, saving mean and rstd (RMSNorm: out = x * rstd * weight, saving rstd); x is read three
// times (mean, variance, output), from L1 after the first.
template <bool kCentred, int kWidth, typename T>
__global__ void normalize_kernel(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                         const float* x, const T* __restrict__ add, float* sum,
                                         const float* __restrict__ weight, const float* __restrict__ bias,
                                         int64_t rows, int64_t cols, float eps) {
  const int lane = lane_index();
  const int64_t packs = cols / kWidth;
  const auto count = static_cast<double>(cols);
  for (int64_t r = grid_warp_index(); r < rows; r += grid_warp_count()) {
    const float* x_row = x + r * cols;
    double row_sum = 0.0;
    if (add != nullptr) {
      const T* add_row = add + r * cols;
      float* sum_row = sum + r * cols;
      for (int64_t k = lane; k < packs; k += kWarpSize) {
        Floats<kWidth> values = load_floats<kWidth>(x_row + k * kWidth);
        const Floats<kWidth> addend = load_floats<kWidth>(add_row + k * kWidth);
        for (int j = 0; j < kWidth; ++j) {
          values.v[j] = values.v[j] + addend.v[j];
          if constexpr (kCentred) row_sum += static_cast<double>(values.v[j]);
        }
        store_floats<kWidth>(sum_row + k * kWidth, values);
      }
      x_row = sum_row;
    } else if constexpr (kCentred) {
      for (int64_t k = lane; k < packs; k += kWarpSize) {
        const Floats<kWidth> values = load_floats<kWidth>(x_row + k * kWidth);
        for (int j = 0; j < kWidth; ++j) row_sum += static_cast<double>(values.v[j]);
      }
    }
    const double row_mean = kCentred ? warp_sum(row_sum) / count : 0.0;
    // Two passes: the variance of the centred values, with no cancellation (RMSNorm's mean square).
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
      if constexpr (kCentred) mean[r] = row_mean_float;
      rstd[r] = row_rstd;
    }
    T* out_row = out + r * cols;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> values = load_floats<kWidth>(x_row + k * kWidth);
      const Floats<kWidth> w = load_floats<kWidth>(weight + k * kWidth);
      Floats<kWidth> result;
      if constexpr (kCentred) {
        const Floats<kWidth> b = load_floats<kWidth>(bias + k * kWidth);
        for (int j = 0; j < kWidth; ++j) result.v[j] = (values.v[j] - row_mean_float) * row_rstd * w.v[j] + b.v[j];
      } else {
        for (int j = 0; j < kWidth; ++j) result.v[j] = values.v[j] * row_rstd * w.v[j];
      }
      store_floats<kWidth>(out_row + k * kWidth, result);
    }
  }
}

// The backward's row means, each rounded to float once, as the CPU passes them on.
struct RowMeans {
  float grad_norm;             // mean(grad_out * weight); RMSNorm has none (0)
  float grad_norm_times_norm;  // mean(grad_out * weight * norm)
};

// A warp per row: both means (RMSNorm: the second) in one pass over grad_out, x and weight, summed
// in double.
template <bool kCentred, int kWidth, typename T>
__global__ void row_means_kernel(RowMeans* __restrict__ row_means, const T* grad_out,
                                           const float* __restrict__ x, const float* __restrict__ weight,
                                           const float* __restrict__ mean, const float* __restrict__ rstd, int64_t rows,
                                           int64_t cols) {
  const int lane = lane_index();
  const int64_t packs = cols / kWidth;
  const auto count = static_cast<double>(cols);
  for (int64_t r = grid_warp_index(); r < rows; r += grid_warp_count()) {
    const float* x_row = x + r * cols;
    const T* grad_out_row = grad_out + r * cols;
    const float row_mean = kCentred ? mean[r] : 0.0f, row_rstd = rstd[r];
    double grad_norm_sum = 0.0, grad_norm_times_norm_sum = 0.0;
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> g = load_floats<kWidth>(grad_out_row + k * kWidth);
      const Floats<kWidth> values = load_floats<kWidth>(x_row + k * kWidth);
      const Floats<kWidth> w = load_floats<kWidth>(weight + k * kWidth);
      for (int j = 0; j < kWidth; ++j) {
        const float grad_norm = g.v[j] * w.v[j];
        const float norm = kCentred ? (values.v[j] - row_mean) * row_rstd : values.v[j] * row_rstd;
        if constexpr (kCentred) grad_norm_sum += static_cast<double>(grad_norm);
        grad_norm_times_norm_sum += static_cast<double>(grad_norm) * norm;
      }
    }
    if constexpr (kCentred) grad_norm_sum = warp_sum(grad_norm_sum);
    grad_norm_times_norm_sum = warp_sum(grad_norm_times_norm_sum);
    if (lane == 0)
      row_means[r] = {static_cast<float>(grad_norm_sum / count), static_cast<float>(grad_norm_times_norm_sum / count)};
  }
}

// The column-sum grid over [rows, cols]: grad_x += rstd * (grad_norm - mean(grad_norm) - norm *
// mean(grad_norm * norm)) element by element (RMSNorm's without mean(grad_norm); grad_x_copy,
// where given, takes the sum), and grad_weight and grad_bias (RMSNorm: grad_weight alone) take the
// column sums of grad_out * norm and of grad_out.
template <bool kCentred, typename T>
__global__ void normalize_backward_kernel(float* grad_x, T* __restrict__ grad_x_copy, float* __restrict__ grad_weight,
                                          float* __restrict__ grad_bias, const T* grad_out,
                                          const float* __restrict__ x,
                                          const float* __restrict__ weight, const float* __restrict__ mean,
                                          const float* __restrict__ rstd, const RowMeans* __restrict__ row_means,
                                          ColumnSums shape) {
  constexpr int kSums = kCentred ? 2 : 1;
  const auto element = [&](int64_t row, int64_t column, float (&weight_and_bias_sums)[kSums]) {
    const int64_t i = row * shape.cols + column;
    const float row_rstd = rstd[row];
    const RowMeans means = row_means[row];
    const float gradient = widen(grad_out[i]);
    const float grad_norm = gradient * weight[column];
    float accumulated;
    if constexpr (kCentred) {
      const float norm = (x[i] - mean[row]) * row_rstd;
      weight_and_bias_sums[0] += gradient * norm;
      weight_and_bias_sums[1] += gradient;
      accumulated = grad_x[i] + (grad_norm - means.grad_norm - norm * means.grad_norm_times_norm) * row_rstd;
    } else {
      const float norm = x[i] * row_rstd;
      weight_and_bias_sums[0] += gradient * norm;
      accumulated = grad_x[i] + (grad_norm - norm * means.grad_norm_times_norm) * row_rstd;
    }
    grad_x[i] = accumulated;
    if (grad_x_copy != nullptr) grad_x_copy[i] = narrow<T>(accumulated);
  };
  if constexpr (kCentred)
    sum_columns<2>(shape, {grad_weight, grad_bias}, element);
  else
    sum_columns<1>(shape, {grad_weight}, element);
}

template <bool kCentred>
void normalize(const char* op, Stream stream, TypedPtr out, float* mean, float* rstd, const float* x,
               ConstTypedPtr add, float* sum, const float* weight, const float* bias, int64_t rows, int64_t cols,
               float eps) {
  if (rows == 0 || cols == 0) return;
  with_element_type(one_element_type(op, {out, add}), [&](auto type) {
    using T = typename decltype(type)::type;
    const bool aligned = aligned_to(kNormWidth * sizeof(float), {x, sum, weight, bias}) &&
                         aligned_to(kNormWidth * sizeof(T), {out.data, add.data});
    with_width<kNormWidth>(cols % kNormWidth == 0 && aligned, [&](auto width) {
      launch(cuda_stream(stream), blocks_for_rows(rows), kBlockThreads, normalize_kernel<kCentred, width(), T>,
             typed<T>(out), mean, rstd, x, typed<T>(add), sum, weight, bias, rows, cols, eps);
    });
  });
}

template <bool kCentred>
void normalize_backward(const char* op, Stream stream, float* grad_x, TypedPtr grad_x_copy, float* grad_weight,
                        float* grad_bias, ConstTypedPtr grad_out, const float* x, const float* weight,
                        const float* mean, const float* rstd, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  const cudaStream_t cuda = cuda_stream(stream);
  auto* row_means = scratch_of(cuda).intermediates.get<RowMeans>(static_cast<size_t>(rows) * sizeof(RowMeans), cuda);
  with_element_type(one_element_type(op, {grad_out, grad_x_copy}), [&](auto type) {
    using T = typename decltype(type)::type;
    const bool aligned =
        aligned_to(kNormWidth * sizeof(float), {x, weight}) && aligned_to(kNormWidth * sizeof(T), {grad_out.data});
    with_width<kNormWidth>(cols % kNormWidth == 0 && aligned, [&](auto width) {
      launch(cuda, blocks_for_rows(rows), kBlockThreads, row_means_kernel<kCentred, width(), T>, row_means,
             typed<T>(grad_out), x, weight, mean, rstd, rows, cols);
    });
    const ColumnSumLaunch shape = column_sum_launch(cuda, rows, cols, kCentred ? 2 : 1);
    launch(cuda, shape.grid, shape.block, normalize_backward_kernel<kCentred, T>, grad_x, typed<T>(grad_x_copy),
           grad_weight, grad_bias, typed<T>(grad_out), x, weight, mean, rstd, row_means, shape.sums);
  });
}

}  // namespace

void layernorm_forward(Stream stream, TypedPtr out, float* mean, float* rstd, const float* x, ConstTypedPtr add,
                       float* sum, const float* weight, const float* bias, int64_t rows, int64_t cols, float eps) {
  normalize<true>("layernorm_forward", stream, out, mean, rstd, x, add, sum, weight, bias, rows, cols, eps);
}

void layernorm_backward(Stream stream, float* grad_x, TypedPtr grad_x_copy, float* grad_weight, float* grad_bias,
                        ConstTypedPtr grad_out, const float* x, const float* weight, const float* mean,
                        const float* rstd, int64_t rows, int64_t cols) {
  normalize_backward<true>("layernorm_backward", stream, grad_x, grad_x_copy, grad_weight, grad_bias, grad_out, x,
                           weight, mean, rstd, rows, cols);
}

void rmsnorm_forward(Stream stream, TypedPtr out, float* rstd, const float* x, ConstTypedPtr add, float* sum,
                     const float* weight, int64_t rows, int64_t cols, float eps) {
  normalize<false>("rmsnorm_forward", stream, out, nullptr, rstd, x, add, sum, weight, nullptr, rows, cols, eps);
}

void rmsnorm_backward(Stream stream, float* grad_x, TypedPtr grad_x_copy, float* grad_weight, ConstTypedPtr grad_out,
                      const float* x, const float* weight, const float* rstd, int64_t rows, int64_t cols) {
  normalize_backward<false>("rmsnorm_backward", stream, grad_x, grad_x_copy, grad_weight, nullptr, grad_out, x,
                            weight, nullptr, rstd, rows, cols);
}

}  // namespace trainctl::cuda_kernels

// The CPU's norm family: LayerNorm and RMSNorm over the last dimension, forward (with the residual
// add before it fused in) and backward. RMSNorm is LayerNorm without the centring and the bias:
// its mean is taken as 0, so that the same code computes Hugging Face's LlamaRMSNorm in fp32,
// weight * (x * rstd) with rstd = 1 / sqrt(mean(x^2) + eps), operation for operation. Row
// statistics (mean, variance or mean square, and backward's row means) are summed in double and
// rounded to float once, so they are as exact as float holds, whatever the row length; everything
// elementwise is float. A bf16 output is computed in float and rounded once; a bf16 gradient is
// widened a row at a time. Against PyTorch's fp32 LayerNorm (float Welford sums) outputs and
// gradients differ by a few ulps (2e-7 relative at 2048 rows of 256), far inside the 1e-5 the
// GPT-2 loss must match it to.
#include <cmath>

#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

// The loops are free functions taking restrict pointers, so that the vectorizer needs no
// runtime alias checks.
template <bool kCentred>
void normalize_row(float* __restrict out, const float* __restrict x, const float* __restrict weight,
                   const float* __restrict bias, float mean, float rstd, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    if constexpr (kCentred)
      out[c] = (x[c] - mean) * rstd * weight[c] + bias[c];
    else
      out[c] = x[c] * rstd * weight[c];
  }
}

template <bool kCentred>
void accumulate_row_gradients(float* __restrict grad_x, float* __restrict grad_weight, float* __restrict grad_bias,
                              const float* __restrict grad_out, const float* __restrict x,
                              const float* __restrict weight, float mean, float rstd, float mean_grad_norm,
                              float mean_grad_norm_times_norm, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    const float norm = kCentred ? (x[c] - mean) * rstd : x[c] * rstd;
    const float grad_norm = grad_out[c] * weight[c];
    grad_weight[c] += grad_out[c] * norm;
    if constexpr (kCentred) {
      grad_bias[c] += grad_out[c];
      grad_x[c] += (grad_norm - mean_grad_norm - norm * mean_grad_norm_times_norm) * rstd;
    } else {
      grad_x[c] += (grad_norm - norm * mean_grad_norm_times_norm) * rstd;
    }
  }
}

// LayerNorm (kCentred: mean and bias) or RMSNorm (mean null, bias null).
template <bool kCentred>
void normalize(TypedPtr out, float* mean, float* rstd, const float* x, ConstTypedPtr add, float* sum,
               const float* weight, const float* bias, int64_t rows, int64_t cols, float eps) {
  const auto count = static_cast<double>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_row = x + r * cols;
    if (add) {
      const float* add_row = as_floats(add + r * cols, cols, 0);
      float* sum_row = sum + r * cols;
      for (int64_t c = 0; c < cols; ++c) sum_row[c] = x_row[c] + add_row[c];
      x_row = sum_row;
    }
    const double row_mean =
        kCentred ? lane_sum<double>(cols, [&](int64_t c) { return static_cast<double>(x_row[c]); }) / count : 0.0;
    // Two passes: the variance of the centred values, with no cancellation (RMSNorm's mean square).
    const double variance = lane_sum<double>(cols, [&](int64_t c) {
                              const double centred = x_row[c] - row_mean;
                              return centred * centred;
                            }) / count;
    if constexpr (kCentred) mean[r] = static_cast<float>(row_mean);
    rstd[r] = static_cast<float>(1.0 / std::sqrt(variance + eps));
    const TypedPtr out_row = out + r * cols;
    float* normalized = floats_for(out_row, cols, 1);
    normalize_row<kCentred>(normalized, x_row, weight, bias, static_cast<float>(row_mean), rstd[r], cols);
    store_floats(out_row, normalized, cols);
  }
}

// With norm = (x - mean) * rstd (RMSNorm: x * rstd) and grad_norm = grad_out * weight:
//   grad_x = rstd * (grad_norm - mean(grad_norm) - norm * mean(grad_norm * norm)),
// RMSNorm's without the mean(grad_norm) term.
template <bool kCentred>
void normalize_backward(float* grad_x, TypedPtr grad_x_copy, float* grad_weight, float* grad_bias,
                        ConstTypedPtr grad_out, const float* x, const float* weight, const float* mean,
                        const float* rstd, int64_t rows, int64_t cols) {
  const auto count = static_cast<double>(cols);
  float* weight_sums = zeroed_column_sums(0, cols);
  float* bias_sums = kCentred ? zeroed_column_sums(1, cols) : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_row = x + r * cols;
    const float* grad_out_row = as_floats(grad_out + r * cols, cols, 0);
    const float row_mean = kCentred ? mean[r] : 0.0f, row_rstd = rstd[r];
    const auto grad_norm = [&](int64_t c) { return static_cast<double>(grad_out_row[c] * weight[c]); };
    const double mean_grad_norm = kCentred ? lane_sum<double>(cols, grad_norm) / count : 0.0;
    const double mean_grad_norm_times_norm = lane_sum<double>(cols, [&](int64_t c) {
                                               const float norm = kCentred ? (x_row[c] - row_mean) * row_rstd
                                                                           : x_row[c] * row_rstd;
                                               return grad_norm(c) * norm;
                                             }) / count;
    accumulate_row_gradients<kCentred>(grad_x + r * cols, weight_sums, bias_sums, grad_out_row, x_row, weight,
                                       row_mean, row_rstd, static_cast<float>(mean_grad_norm),
                                       static_cast<float>(mean_grad_norm_times_norm), cols);
    if (grad_x_copy) store_floats(grad_x_copy + r * cols, grad_x + r * cols, cols);
  }
  add_column_sums(grad_weight, weight_sums, cols);
  if constexpr (kCentred) add_column_sums(grad_bias, bias_sums, cols);
}

}  // namespace

void layernorm_forward(Stream, TypedPtr out, float* mean, float* rstd, const float* x, ConstTypedPtr add, float* sum,
                       const float* weight, const float* bias, int64_t rows, int64_t cols, float eps) {
  normalize<true>(out, mean, rstd, x, add, sum, weight, bias, rows, cols, eps);
}

void layernorm_backward(Stream, float* grad_x, TypedPtr grad_x_copy, float* grad_weight, float* grad_bias,
                        ConstTypedPtr grad_out, const float* x, const float* weight, const float* mean,
                        const float* rstd, int64_t rows, int64_t cols) {
  normalize_backward<true>(grad_x, grad_x_copy, grad_weight, grad_bias, grad_out, x, weight, mean, rstd, rows, cols);
}

void rmsnorm_forward(Stream, TypedPtr out, float* rstd, const float* x, ConstTypedPtr add, float* sum,
                     const float* weight, int64_t rows, int64_t cols, float eps) {
  normalize<false>(out, nullptr, rstd, x, add, sum, weight, nullptr, rows, cols, eps);
}

void rmsnorm_backward(Stream, float* grad_x, TypedPtr grad_x_copy, float* grad_weight, ConstTypedPtr grad_out,
                      const float* x, const float* weight, const float* rstd, int64_t rows, int64_t cols) {
  normalize_backward<false>(grad_x, grad_x_copy, grad_weight, nullptr, grad_out, x, weight, nullptr, rstd, rows, cols);
}

}  // namespace trainctl::cpu

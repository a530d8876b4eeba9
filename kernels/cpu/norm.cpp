// The CPU's norm family: LayerNorm over the last dimension, forward (with the residual add before
// it fused in) and backward. Row statistics (mean, variance, and backward's two row means) are
// summed in double and rounded to float once, so they are as exact as float holds, whatever the
// row length; everything elementwise is float. A bf16 output is computed in float and rounded
// once; a bf16 gradient is widened a row at a time. Against PyTorch's fp32 LayerNorm (float Welford sums) outputs and
// gradients differ by a few ulps (2e-7 relative at 2048 rows of 256), far inside the 1e-5 the
// GPT-2 loss must match it to.
#include <cmath>

#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

// The loops are free functions taking restrict pointers, so that the vectorizer needs no
// runtime alias checks.
void normalize_row(float* __restrict out, const float* __restrict x, const float* __restrict weight,
                   const float* __restrict bias, float mean, float rstd, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) out[c] = (x[c] - mean) * rstd * weight[c] + bias[c];
}

void accumulate_row_gradients(float* __restrict grad_x, float* __restrict grad_weight, float* __restrict grad_bias,
                              const float* __restrict grad_out, const float* __restrict x,
                              const float* __restrict weight, float mean, float rstd, float mean_grad_norm,
                              float mean_grad_norm_times_norm, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    const float norm = (x[c] - mean) * rstd;
    const float grad_norm = grad_out[c] * weight[c];
    grad_bias[c] += grad_out[c];
    grad_weight[c] += grad_out[c] * norm;
    grad_x[c] += (grad_norm - mean_grad_norm - norm * mean_grad_norm_times_norm) * rstd;
  }
}

}  // namespace

void layernorm_forward(Stream, TypedPtr out, float* mean, float* rstd, const float* x, ConstTypedPtr add, float* sum,
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
    const double row_mean = lane_sum<double>(cols, [&](int64_t c) { return static_cast<double>(x_row[c]); }) / count;
    // Two passes: the variance of the centered values, with no cancellation.
    const double variance = lane_sum<double>(cols, [&](int64_t c) {
                              const double centered = x_row[c] - row_mean;
                              return centered * centered;
                            }) / count;
    mean[r] = static_cast<float>(row_mean);
    rstd[r] = static_cast<float>(1.0 / std::sqrt(variance + eps));
    const TypedPtr out_row = out + r * cols;
    float* normalized = floats_for(out_row, cols, 1);
    normalize_row(normalized, x_row, weight, bias, mean[r], rstd[r], cols);
    store_floats(out_row, normalized, cols);
  }
}

// With norm = (x - mean) * rstd and grad_norm = grad_out * weight:
//   grad_x = rstd * (grad_norm - mean(grad_norm) - norm * mean(grad_norm * norm)).
void layernorm_backward(Stream, float* grad_x, TypedPtr grad_x_copy, float* grad_weight, float* grad_bias,
                        ConstTypedPtr grad_out, const float* x, const float* weight, const float* mean,
                        const float* rstd, int64_t rows, int64_t cols) {
  const auto count = static_cast<double>(cols);
  float* weight_sums = zeroed_column_sums(0, cols);
  float* bias_sums = zeroed_column_sums(1, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_row = x + r * cols;
    const float* grad_out_row = as_floats(grad_out + r * cols, cols, 0);
    const float row_mean = mean[r], row_rstd = rstd[r];
    const double mean_grad_norm =
        lane_sum<double>(cols, [&](int64_t c) { return static_cast<double>(grad_out_row[c] * weight[c]); }) / count;
    const double mean_grad_norm_times_norm = lane_sum<double>(cols, [&](int64_t c) {
                                               const float norm = (x_row[c] - row_mean) * row_rstd;
                                               return static_cast<double>(grad_out_row[c] * weight[c]) * norm;
                                             }) / count;
    accumulate_row_gradients(grad_x + r * cols, weight_sums, bias_sums, grad_out_row, x_row, weight, row_mean,
                             row_rstd, static_cast<float>(mean_grad_norm),
                             static_cast<float>(mean_grad_norm_times_norm), cols);
    if (grad_x_copy) store_floats(grad_x_copy + r * cols, grad_x + r * cols, cols);
  }
  add_column_sums(grad_weight, weight_sums, cols);
  add_column_sums(grad_bias, bias_sums, cols);
}

}  // namespace trainctl::cpu

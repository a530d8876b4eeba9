// The CPU's optimizer family: PyTorch's SGD and AdamW updates, element by element over the
// update's parameter groups, with their scalars derived in double and rounded once as torch.optim
// does, on the gradient clipped as clip_grad_norm_ clips it; the gradient norm's sum of squares in
// double, in index order.
#include <cmath>

#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

// What the update's gradient is multiplied by: max_norm / (norm + 1e-6) where that is below 1,
// else 1 (which changes no gradient).
float clip_factor(const ParameterUpdate& update) {
  if (!(update.max_norm > 0.0)) return 1.0f;
  double squares = 0.0;
  for (int64_t shard = 0; shard < update.shards; ++shard) squares += update.shard_squares[shard];
  const double coefficient = update.max_norm / (std::sqrt(squares) + 1e-6);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

// body(begin, end, decays) for each parameter group of the update, in order.
template <typename Body>
void for_each_group(const ParameterUpdate& update, Body body) {
  int64_t begin = 0;
  for (int64_t group = 0; group < update.groups; ++group) {
    const int64_t end = update.group_ends[group];
    body(begin, end, update.group_decays[group] != 0);
    begin = end;
  }
}

void write_compute_copy(const ParameterUpdate& update, int64_t begin, int64_t end) {
  if (!update.compute_copy) return;
  for (int64_t i = begin; i < end; ++i) store(update.compute_copy, i, update.parameters[i]);
}

}  // namespace

void sgd_step(Stream, const ParameterUpdate& update, float* momentum_buffer, double lr, double momentum) {
  const float clip = clip_factor(update);
  const auto lr_f = static_cast<float>(lr), momentum_f = static_cast<float>(momentum);
  float* param = update.parameters;
  const float* grad = update.gradients;
  for_each_group(update, [&](int64_t begin, int64_t end, bool decays) {
    const auto weight_decay_f = static_cast<float>(decays ? update.weight_decay : 0.0);
    for (int64_t i = begin; i < end; ++i) {
      const float g = grad[i] * clip + weight_decay_f * param[i];
      momentum_buffer[i] = momentum_f * momentum_buffer[i] + g;
      param[i] -= lr_f * momentum_buffer[i];
    }
    write_compute_copy(update, begin, end);
  });
}

void adamw_step(Stream, const ParameterUpdate& update, float* exp_avg, float* exp_avg_sq, double lr, double beta1,
                double beta2, double eps, int64_t step) {
  const float clip = clip_factor(update);
  const auto beta1_f = static_cast<float>(beta1), one_minus_beta1 = static_cast<float>(1.0 - beta1);
  const auto beta2_f = static_cast<float>(beta2), one_minus_beta2 = static_cast<float>(1.0 - beta2);
  const auto step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, static_cast<double>(step))));
  const auto bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step))));
  const auto eps_f = static_cast<float>(eps);
  float* param = update.parameters;
  const float* grad = update.gradients;
  for_each_group(update, [&](int64_t begin, int64_t end, bool decays) {
    const auto decay = static_cast<float>(1.0 - lr * (decays ? update.weight_decay : 0.0));
    for (int64_t i = begin; i < end; ++i) {
      const float g = grad[i] * clip;
      param[i] *= decay;
      exp_avg[i] = beta1_f * exp_avg[i] + one_minus_beta1 * g;
      exp_avg_sq[i] = beta2_f * exp_avg_sq[i] + one_minus_beta2 * g * g;
      const float denominator = std::sqrt(exp_avg_sq[i]) / bias_correction2_sqrt + eps_f;
      param[i] -= step_size * exp_avg[i] / denominator;
    }
    write_compute_copy(update, begin, end);
  });
}

void sum_squares(Stream, const float* x, int64_t n, double* sum) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  *sum = total;
}

}  // namespace trainctl::cpu

// The CPU's optimizer family: PyTorch's SGD and AdamW updates, element by element, with their
// scalars derived in double and rounded once as torch.optim does; the gradient norm's sum of
// squares in double, in index order.
#include <cmath>

#include "cpu_ops.h"

namespace trainctl::cpu {

void sgd_step(Stream, float* param, const float* grad, float* momentum_buffer, int64_t n, double lr, double momentum,
              double weight_decay) {
  const auto lr_f = static_cast<float>(lr), momentum_f = static_cast<float>(momentum);
  const auto weight_decay_f = static_cast<float>(weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] + weight_decay_f * param[i];
    momentum_buffer[i] = momentum_f * momentum_buffer[i] + g;
    param[i] -= lr_f * momentum_buffer[i];
  }
}

void adamw_step(Stream, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n, double lr,
                double beta1, double beta2, double eps, double weight_decay, int64_t step) {
  const auto decay = static_cast<float>(1.0 - lr * weight_decay);
  const auto beta1_f = static_cast<float>(beta1), one_minus_beta1 = static_cast<float>(1.0 - beta1);
  const auto beta2_f = static_cast<float>(beta2), one_minus_beta2 = static_cast<float>(1.0 - beta2);
  const auto step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, static_cast<double>(step))));
  const auto bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step))));
  const auto eps_f = static_cast<float>(eps);
  for (int64_t i = 0; i < n; ++i) {
    param[i] *= decay;
    exp_avg[i] = beta1_f * exp_avg[i] + one_minus_beta1 * grad[i];
    exp_avg_sq[i] = beta2_f * exp_avg_sq[i] + one_minus_beta2 * grad[i] * grad[i];
    const float denominator = std::sqrt(exp_avg_sq[i]) / bias_correction2_sqrt + eps_f;
    param[i] -= step_size * exp_avg[i] / denominator;
  }
}

double sum_squares(Stream, const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

void scale(Stream, float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace trainctl::cpu

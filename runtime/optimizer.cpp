// Optimizers and the learning-rate schedule: see optimizer.h.
#include "optimizer.h"

#include <cmath>

namespace trainctl {

Optimizer::Optimizer(const TrainSpec& spec, const DeviceOps& ops, int64_t parameter_count)
    : spec_(spec), ops_(ops), parameter_count_(parameter_count), first_moment_(ops, parameter_count) {
  ops_.fill_zero(first_moment_.get(), parameter_count);
  if (spec_.optimizer == OptimizerKind::kAdamW) {
    second_moment_ = DeviceBuffer<float>(ops, parameter_count);
    ops_.fill_zero(second_moment_.get(), parameter_count);
  }
}

const char* Optimizer::name() const { return spec_.optimizer == OptimizerKind::kSgd ? "sgd" : "adamw"; }

std::vector<std::pair<std::string, DeviceBuffer<float>*>> Optimizer::state() {
  if (spec_.optimizer == OptimizerKind::kSgd) return {{"momentum_buffer", &first_moment_}};
  return {{"exp_avg", &first_moment_}, {"exp_avg_sq", &second_moment_}};
}

void Optimizer::step(float* parameters, const float* gradients, double lr) {
  ++step_count_;
  if (spec_.optimizer == OptimizerKind::kSgd) {
    ops_.sgd_step(parameters, gradients, first_moment_.get(), parameter_count_, lr, spec_.momentum,
                  spec_.weight_decay);
  } else {
    ops_.adamw_step(parameters, gradients, first_moment_.get(), second_moment_.get(), parameter_count_, lr,
                    spec_.beta1, spec_.beta2, spec_.eps, spec_.weight_decay, step_count_);
  }
}

double learning_rate(const TrainSpec& spec, int64_t step) {
  if (step < spec.warmup_steps) return spec.lr * static_cast<double>(step + 1) / static_cast<double>(spec.warmup_steps);
  const int64_t decay_steps = spec.steps - spec.warmup_steps;
  const double progress = decay_steps > 0 ? static_cast<double>(step - spec.warmup_steps) / decay_steps : 0.0;
  switch (spec.schedule) {
    case Schedule::kLinear: return spec.lr * (1.0 - progress);
    case Schedule::kCosine: return spec.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
    default: return spec.lr;
  }
}

}  // namespace trainctl

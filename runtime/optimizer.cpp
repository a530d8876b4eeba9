// Optimizers and the learning-rate schedule: see optimizer.h.
#include "optimizer.h"

#include <algorithm>
#include <cmath>

namespace trainctl {

Optimizer::Optimizer(const TrainSpec& spec, const Device& device, Stream stream,
                     const std::vector<ParameterSlice>& layout, int64_t begin, int64_t end)
    : spec_(spec), device_(device), stream_(stream), begin_(begin), end_(end) {
  for (const ParameterSlice& slice : layout) {
    const int64_t first = std::max(slice.offset, begin), last = std::min(slice.offset + slice.count, end);
    if (first >= last) continue;
    const double weight_decay = slice.decay ? spec.weight_decay : 0.0;
    if (!spans_.empty() && spans_.back().weight_decay == weight_decay && spans_.back().offset + spans_.back().count == first)
      spans_.back().count += last - first;
    else
      spans_.push_back({first, last - first, weight_decay});
  }
  const int64_t count = end - begin;
  first_moment_ = DeviceBuffer<float>(device, count);
  device_.memory.fill_zero(stream_, first_moment_.get(), count);
  if (spec_.optimizer == OptimizerKind::kAdamW) {
    second_moment_ = DeviceBuffer<float>(device, count);
    device_.memory.fill_zero(stream_, second_moment_.get(), count);
  }
}

const char* Optimizer::name() const { return spec_.optimizer == OptimizerKind::kSgd ? "sgd" : "adamw"; }

std::vector<std::pair<std::string, DeviceBuffer<float>*>> Optimizer::state() {
  if (spec_.optimizer == OptimizerKind::kSgd) return {{"momentum_buffer", &first_moment_}};
  return {{"exp_avg", &first_moment_}, {"exp_avg_sq", &second_moment_}};
}

void Optimizer::step(float* parameters, const float* gradients, double lr) {
  ++step_count_;
  for (const Span& span : spans_) {
    float* first_moment = first_moment_.get() + (span.offset - begin_);
    if (spec_.optimizer == OptimizerKind::kSgd) {
      device_.optimizer.sgd_step(stream_, parameters + span.offset, gradients + span.offset, first_moment, span.count,
                                 lr, spec_.momentum, span.weight_decay);
    } else {
      device_.optimizer.adamw_step(stream_, parameters + span.offset, gradients + span.offset, first_moment,
                                   second_moment_.get() + (span.offset - begin_), span.count, lr, spec_.beta1,
                                   spec_.beta2, spec_.eps, span.weight_decay, step_count_);
    }
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

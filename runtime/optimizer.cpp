// Optimizers and the learning-rate schedule: see optimizer.h.
#include "optimizer.h"

#include <algorithm>
#include <cmath>

namespace trainctl {

Optimizer::Optimizer(const TrainSpec& spec, const Device& device, Stream stream,
                     const std::vector<ParameterSlice>& layout, int64_t begin, int64_t end)
    : spec_(spec), device_(device), stream_(stream), begin_(begin), end_(end) {
  std::vector<int64_t> ends;
  std::vector<uint8_t> decays;
  for (const ParameterSlice& slice : layout) {
    const int64_t first = std::max(slice.offset, begin), last = std::min(slice.offset + slice.count, end);
    if (first >= last) continue;
    const uint8_t decay = slice.decay && spec.weight_decay != 0.0 ? 1 : 0;
    // A group runs on over tensors of the same decay, and over the padding between them.
    if (!decays.empty() && decays.back() == decay)
      ends.back() = last - begin;
    else {
      if (!ends.empty()) ends.back() = first - begin;
      ends.push_back(last - begin);
      decays.push_back(decay);
    }
  }
  group_ends_ = DeviceBuffer<int64_t>(device, static_cast<int64_t>(ends.size()));
  group_ends_.upload(ends.data(), static_cast<int64_t>(ends.size()));
  group_decays_ = DeviceBuffer<uint8_t>(device, static_cast<int64_t>(decays.size()));
  group_decays_.upload(decays.data(), static_cast<int64_t>(decays.size()));
  const int64_t count = end - begin;
  first_moment_ = DeviceBuffer<float>(device, count);
  device_.memory.fill_zero(stream_, first_moment_.get(), static_cast<size_t>(count) * sizeof(float));
  if (spec_.optimizer == OptimizerKind::kAdamW) {
    second_moment_ = DeviceBuffer<float>(device, count);
    device_.memory.fill_zero(stream_, second_moment_.get(), static_cast<size_t>(count) * sizeof(float));
  }
}

const char* Optimizer::name() const { return spec_.optimizer == OptimizerKind::kSgd ? "sgd" : "adamw"; }

std::vector<std::pair<std::string, DeviceBuffer<float>*>> Optimizer::state() {
  if (spec_.optimizer == OptimizerKind::kSgd) return {{"momentum_buffer", &first_moment_}};
  return {{"exp_avg", &first_moment_}, {"exp_avg_sq", &second_moment_}};
}

void Optimizer::step(float* parameters, const float* gradients, TypedPtr compute_copy, const double* shard_squares,
                     int64_t shards, double lr) {
  ++step_count_;
  const ParameterUpdate update{
      .parameters = parameters,
      .gradients = gradients,
      .compute_copy = compute_copy,
      .n = end_ - begin_,
      .group_ends = group_ends_.get(),
      .group_decays = group_decays_.get(),
      .groups = group_ends_.size(),
      .weight_decay = spec_.weight_decay,
      .shard_squares = shard_squares,
      .shards = shards,
      .max_norm = spec_.grad_clip,
  };
  if (spec_.optimizer == OptimizerKind::kSgd)
    device_.optimizer.sgd_step(stream_, update, first_moment_.get(), lr, spec_.momentum);
  else
    device_.optimizer.adamw_step(stream_, update, first_moment_.get(), second_moment_.get(), lr, spec_.beta1,
                                 spec_.beta2, spec_.eps, step_count_);
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

// Optimizers over the model's flat parameter buffer, with PyTorch's semantics so that a
// checkpoint's optimizer state means what torch.optim's would: SGD with momentum keeps
// "momentum_buffer"; AdamW keeps "exp_avg" and "exp_avg_sq" and a step count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "train_spec.h"

namespace trainctl {

class Optimizer {
 public:
  Optimizer(const TrainSpec& spec, const DeviceOps& ops, int64_t parameter_count);

  void step(float* parameters, const float* gradients, double lr);

  const char* name() const;
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps) { step_count_ = steps; }
  // The state buffers by PyTorch state name, each of parameter_count floats.
  std::vector<std::pair<std::string, DeviceBuffer<float>*>> state();

 private:
  TrainSpec spec_;
  const DeviceOps& ops_;
  int64_t parameter_count_;
  int64_t step_count_ = 0;
  DeviceBuffer<float> first_moment_;   // momentum_buffer (sgd) or exp_avg (adamw)
  DeviceBuffer<float> second_moment_;  // exp_avg_sq (adamw only)
};

// The learning rate for the step with 0-based index `step`: linear warmup over warmup_steps,
// then constant, or a linear or cosine decay to zero at train.steps.
double learning_rate(const TrainSpec& spec, int64_t step);

}  // namespace trainctl

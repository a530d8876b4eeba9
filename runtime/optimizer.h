// Optimizers over a model's flat parameter buffer, with PyTorch's semantics so that a
// checkpoint's optimizer state means what torch.optim's would: SGD with momentum keeps
// "momentum_buffer"; AdamW keeps "exp_avg" and "exp_avg_sq" and a step count. Two parameter
// groups, as GPT-2 practice has them: the tensors the model marks for decay take
// train.weight_decay, the others none.
// An optimizer covers a range of the flat buffer: all of it, or with ZeRO-1 this rank's shard,
// whose state alone it holds. One device op steps the whole range (its groups are device arrays),
// clipping the gradient on the way from the gradient norm's squares, which stay on the device, and
// writing the bf16 compute copy of the parameters where the model has one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "model.h"
#include "train_spec.h"

namespace trainctl {

class Optimizer {
 public:
  // Steps the elements [begin, end) of the buffers laid out as `layout`.
  Optimizer(const TrainSpec& spec, const Device& device, Stream stream, const std::vector<ParameterSlice>& layout,
            int64_t begin, int64_t end);

  // Steps elements [begin, end) of the layout, which `parameters` (and compute_copy, where given)
  // and `gradients` hold from their element 0 on, after clipping the gradients to
  // train.grad_clip by the norm whose squares are shard_squares[0, shards) (device doubles).
  void step(float* parameters, const float* gradients, TypedPtr compute_copy, const double* shard_squares,
            int64_t shards, double lr);

  const char* name() const;
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps) { step_count_ = steps; }
  // The state buffers by PyTorch state name, each holding the elements [begin(), end()) of a
  // buffer laid out as the parameters.
  std::vector<std::pair<std::string, DeviceBuffer<float>*>> state();
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

 private:
  TrainSpec spec_;
  const Device& device_;
  Stream stream_;
  int64_t begin_, end_;
  // The range's parameter groups: runs of adjacent tensors that take weight decay or do not, as
  // ParameterUpdate has them.
  DeviceBuffer<int64_t> group_ends_;
  DeviceBuffer<uint8_t> group_decays_;
  int64_t step_count_ = 0;
  DeviceBuffer<float> first_moment_;   // momentum_buffer (sgd) or exp_avg (adamw)
  DeviceBuffer<float> second_moment_;  // exp_avg_sq (adamw only)
};

// The learning rate for the step with 0-based index `step`: linear warmup over warmup_steps,
// then constant, or a linear or cosine decay to zero at train.steps.
double learning_rate(const TrainSpec& spec, int64_t step);

}  // namespace trainctl

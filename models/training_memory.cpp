// The memory one rank holds to train a model: see training_memory.h.
#include "training_memory.h"

namespace trainctl {

TrainingMemory training_memory(const TrainSpec& train, const ModelFootprint& model, int64_t world) {
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float));
  TrainingMemory memory;
  memory.weights = model.parameters * kFloat;
  memory.gradients = memory.weights;
  memory.optimizer_buffers = train.optimizer == OptimizerKind::kAdamW ? 2 : 1;
  memory.shard = (model.parameters + world - 1) / world * kFloat;
  memory.optimizer_state = memory.optimizer_buffers * (train.zero == 1 ? memory.shard : memory.weights);
  memory.compute_copy = model.compute_copy_bytes;
  memory.activations = model.activation_bytes;
  return memory;
}

}  // namespace trainctl

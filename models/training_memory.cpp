// The memory one rank holds to train a model: see training_memory.h.
#include "training_memory.h"

#include <algorithm>

namespace trainctl {

// As models/parameter_store.cpp allocates.
TrainingMemory training_memory(const TrainSpec& train, const ModelFootprint& model, int64_t world) {
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float));
  TrainingMemory memory;
  const int64_t whole = model.parameters * kFloat;
  memory.shard = (model.parameters + world - 1) / world * kFloat;
  memory.weights = train.zero == 3 ? memory.shard : whole;
  memory.gradients = train.zero >= 2 ? memory.shard : whole;
  memory.optimizer_buffers = train.optimizer == OptimizerKind::kAdamW ? 2 : 1;
  memory.optimizer_state = memory.optimizer_buffers * (train.zero > 0 ? memory.shard : whole);
  memory.compute_copy = train.zero == 3 ? 0 : model.compute_copy_bytes;
  if (train.zero >= 2)
    memory.layer_gradients = (std::min<int64_t>(2, model.layers) * model.largest_layer + model.kept_layer) * kFloat;
  if (train.zero == 3) {
    memory.layers_in_turn = train.reshard_after_forward ? std::min<int64_t>(2, model.layers) : model.layers;
    // fp32, and the bf16 the GEMMs read where the model has a compute copy.
    const int64_t bytes_per_weight =
        kFloat + (model.compute_copy_bytes > 0 ? static_cast<int64_t>(element_bytes(ElementType::kBf16)) : 0);
    memory.gathered_layers = (memory.layers_in_turn * model.largest_layer + model.kept_layer) * bytes_per_weight;
  }
  memory.activations = model.activation_bytes;
  memory.gemm_workspace = train.device == "cpu" ? 0 : kGpuGemmWorkspaceBytes;
  return memory;
}

}  // namespace trainctl

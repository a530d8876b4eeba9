// The memory one rank holds to train a model, by what holds it: the weights, their gradients, the
// optimizer state (a 1/world shard of it with ZeRO-1), the bf16 compute copy and the activations,
// all in the memory of train.device. `trainctl estimate` lists them (cli/estimate/), and the
// runtime's node check compares a GPU's free memory with their sum, so that both count alike.
#pragma once

#include <cstdint>

#include "model.h"
#include "train_spec.h"

namespace trainctl {

struct TrainingMemory {
  int64_t weights = 0;
  int64_t gradients = 0;
  int64_t optimizer_buffers = 0;  // flat buffers of state: AdamW's two moments, SGD's momentum
  int64_t optimizer_state = 0;    // this rank's: every buffer whole, or with ZeRO-1 its shard of each
  int64_t shard = 0;              // a rank's share of one flat buffer: at most ceil(parameters / world)
  int64_t compute_copy = 0;
  int64_t activations = 0;

  int64_t device_bytes() const { return weights + gradients + optimizer_state + compute_copy + activations; }
};

// One rank's of `world` ranks, training a model of `model`'s footprint as `train` says.
TrainingMemory training_memory(const TrainSpec& train, const ModelFootprint& model, int64_t world);

}  // namespace trainctl

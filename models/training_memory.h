// The memory one rank holds to train a model, by what holds it: the weights, their gradients, the
// optimizer state, the bf16 compute copy and the activations, all in the memory of train.device,
// as train.zero shards them (docs/runtime.md): ZeRO-1 a 1/world shard of the optimizer state,
// ZeRO-2 also of the gradients (with the buffers of the layers backward reduces one at a time),
// ZeRO-3 also of the weights (with the buffers of the layers it gathers, and none of the compute
// copy beyond theirs). `trainctl estimate` lists them (cli/estimate/), and the runtime's node
// check compares a GPU's free memory with their sum, so that both count alike.
#pragma once

#include <cstdint>

#include "model.h"
#include "train_spec.h"

namespace trainctl {

struct TrainingMemory {
  int64_t weights = 0;            // the fp32 masters this rank holds
  int64_t gradients = 0;          // the gradients it holds (summed, with ZeRO-2 and 3)
  int64_t optimizer_buffers = 0;  // flat buffers of state: AdamW's two moments, SGD's momentum
  int64_t optimizer_state = 0;    // this rank's: every buffer whole, or with ZeRO its shard of each
  int64_t shard = 0;              // a rank's share of one flat buffer: at most ceil(parameters / world)
  int64_t compute_copy = 0;
  // ZeRO-3: the gathered weights of the layers in turn (two, or every layer without resharding)
  // and of the kept layer, in fp32 and, for bf16, converted; ZeRO-2 and 3: the gradients of the
  // layers backward reduces in turn (two) and of the kept layer.
  int64_t gathered_layers = 0;
  int64_t layer_gradients = 0;
  int64_t layers_in_turn = 0;  // of gathered_layers: how many numbered layers' buffers it counts
  int64_t activations = 0;
  int64_t gemm_workspace = 0;  // a GPU's (kGpuGemmWorkspaceBytes)

  int64_t device_bytes() const {
    return weights + gradients + optimizer_state + compute_copy + gathered_layers + layer_gradients + activations +
           gemm_workspace;
  }
};

// One rank's of `world` ranks, training a model of `model`'s footprint as `train` says.
TrainingMemory training_memory(const TrainSpec& train, const ModelFootprint& model, int64_t world);

}  // namespace trainctl

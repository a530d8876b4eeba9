// Gradient averaging across ranks, and with ZeRO-1 the gathering of the stepped parameters.
// Each rank scales its gradients by 1/G (G the global batch), so their sum over ranks is the
// mean.
//   Host memory (the CPU): once backward is done, one MPI reduce-scatter over the rank shards of
//   shard_layout.h, so each rank holds the sum of its own shard; without ZeRO an all-gather then
//   gives every rank the whole sum. Both modes sum alike, so a run with zero = 1 steps exactly the
//   values one with zero = 0 does.
//   A device with collectives (CUDA: NCCL, bootstrapped over MPI): without ZeRO each layer's
//   slice is all-reduced on the group's own stream as soon as backward has finished it, so the
//   reduction of later layers overlaps the backward pass through earlier ones; with ZeRO-1 the
//   whole buffer is reduce-scattered once backward is done.
// With ZeRO-1 each rank steps only its shard, and gather_parameters() then gives every rank
// every shard's parameters.
// Only the last micro-step of a step communicates: the trainer reports layers on that one only.
// With ZeRO-2 and 3 the model's store gathers and reduces layer by layer
// (models/parameter_store.h) through the same collectives, as LayerCollectives: MPI's on the
// host, at once; the device's on the group's stream, after the compute queued before them.
#pragma once

#include <cstdint>
#include <memory>

#include "comm.h"
#include "device.h"
#include "parameter_store.h"
#include "shard_layout.h"

namespace trainctl {

class GradientSync : public LayerCollectives {
 public:
  // gradients[offset, offset + count) is final for this step.
  virtual void layer_ready(float* gradients, int64_t offset, int64_t count) = 0;
  // Every later operation on the gradients sees the global sum: of every element, or with ZeRO-1
  // of this rank's shard's.
  virtual void finish(float* gradients, int64_t count) = 0;
  // ZeRO-1: every rank's shard of `parameters` becomes the one its owner stepped.
  virtual void gather_parameters(float* parameters) = 0;
  // values[r] (device memory, a double per rank) becomes rank r's, bit for bit, on every rank: the
  // gradient norm's squares of each ZeRO-1 shard. The host does not wait.
  virtual void gather_shard_values(double* values) = 0;
};

// Throws BadInput for a device other than the CPU without collectives on several ranks. Makes no
// collective call, unlike make_gradient_sync, which checks the same first.
void require_gradient_sync(const Device& device, const Comm& comm);
// A collective call where the device has collectives (they open a group of every rank). `zero`:
// the optimizer state is sharded (train.zero > 0).
std::unique_ptr<GradientSync> make_gradient_sync(const Device& device, Comm& comm, const ShardLayout& shards,
                                                 bool zero);

}  // namespace trainctl

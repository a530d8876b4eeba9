// Gradient averaging across ranks. Each rank scales its gradients by 1/G (G the global batch),
// so their sum over ranks is the mean; after finish() every rank holds that sum.
//   A device with collectives (CUDA: NCCL, bootstrapped over MPI): each layer's slice is
//   all-reduced on the group's own stream as soon as backward has finished it, so the reduction
//   of later layers overlaps the backward pass through earlier ones.
//   Host memory (the CPU): one MPI all-reduce of the whole buffer once backward is done.
// Only the last micro-step of a step communicates: the trainer reports layers on that one only.
#pragma once

#include <cstdint>
#include <memory>

#include "comm.h"
#include "device.h"

namespace trainctl {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // gradients[offset, offset + count) is final for this step.
  virtual void layer_ready(float* gradients, int64_t offset, int64_t count) = 0;
  // Every later operation on the gradients sees the global sum.
  virtual void finish(float* gradients, int64_t count) = 0;
};

// Throws BadInput for a device other than the CPU without collectives on several ranks. Makes no
// collective call, unlike make_gradient_sync, which checks the same first.
void require_gradient_sync(const Device& device, const Comm& comm);
// A collective call where the device has collectives (they open a group of every rank).
std::unique_ptr<GradientSync> make_gradient_sync(const Device& device, Comm& comm);

}  // namespace trainctl

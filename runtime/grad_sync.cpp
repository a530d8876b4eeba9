// Gradient averaging across ranks: see grad_sync.h.
#include "grad_sync.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "bad_input.h"
#include "signals.h"

namespace trainctl {

namespace {

// A world of one has nothing to average.
class NoSync : public GradientSync {
 public:
  void layer_ready(float*, int64_t, int64_t) override {}
  void finish(float*, int64_t) override {}
  void gather_parameters(float*) override {}
  void gather_shard_values(double*) override {}
  void all_gather(float*, const std::vector<int64_t>&) override {}
  void reduce_scatter_sum(float*, const std::vector<int64_t>&) override {}
  void wait() override {}
};

// Host memory: the whole buffer at once, whose result does not depend on how backward was split
// into layers.
class MpiSync : public GradientSync {
 public:
  MpiSync(Comm& comm, const ShardLayout& shards, bool zero) : comm_(comm), shards_(shards), zero_(zero) {}
  void layer_ready(float*, int64_t, int64_t) override {}
  void finish(float* gradients, int64_t) override {
    comm_.reduce_scatter_sum(gradients, shards_.bounds);
    if (!zero_) comm_.all_gather(gradients, shards_.bounds);
  }
  void gather_parameters(float* parameters) override {
    if (zero_) comm_.all_gather(parameters, shards_.bounds);
  }
  // Host memory: the values are the host's to read and write.
  void gather_shard_values(double* values) override {
    const std::vector<double> gathered = comm_.all_gather(values[comm_.rank()]);
    std::copy(gathered.begin(), gathered.end(), values);
  }
  void all_gather(float* data, const std::vector<int64_t>& bounds) override { comm_.all_gather(data, bounds); }
  void reduce_scatter_sum(float* data, const std::vector<int64_t>& bounds) override {
    comm_.reduce_scatter_sum(data, bounds);
  }
  void wait() override {}

 private:
  Comm& comm_;
  const ShardLayout& shards_;
  const bool zero_;
};

// Device memory, through the device's collectives (NCCL on CUDA), on the group's own stream after
// the work queued on the compute stream so far; finish() and gather_parameters() make later
// compute wait for them, the host never.
class DeviceCollectiveSync : public GradientSync {
 public:
  DeviceCollectiveSync(const CollectiveOps& collectives, Comm& comm, const ShardLayout& shards, bool zero)
      : collectives_(collectives), shards_(shards), zero_(zero) {
    // NCCL starts proxy threads; they must not be the ones a stop signal is delivered to.
    with_stop_signals_blocked([&] {
      group_ = collectives.open_group(comm.rank(), comm.world_size(),
                                      [&comm](void* bytes, size_t size) { comm.broadcast(bytes, size); });
    });
    // A double per rank is two floats per rank to all_gather, which copies bits.
    for (int r = 0; r <= comm.world_size(); ++r) value_bounds_.push_back(2 * int64_t{r});
  }
  ~DeviceCollectiveSync() override { collectives_.close_group(group_); }
  DeviceCollectiveSync(const DeviceCollectiveSync&) = delete;
  DeviceCollectiveSync& operator=(const DeviceCollectiveSync&) = delete;

  void layer_ready(float* gradients, int64_t offset, int64_t count) override {
    if (!zero_) collectives_.all_reduce_sum(group_, Stream{}, gradients + offset, count);
  }
  void finish(float* gradients, int64_t) override {
    if (zero_) collectives_.reduce_scatter_sum(group_, Stream{}, gradients, shards_.bounds.data());
    collectives_.wait_reductions(group_, Stream{});
  }
  void gather_parameters(float* parameters) override {
    if (!zero_) return;
    collectives_.all_gather(group_, Stream{}, parameters, shards_.bounds.data());
    collectives_.wait_reductions(group_, Stream{});
  }
  void gather_shard_values(double* values) override {
    collectives_.all_gather(group_, Stream{}, reinterpret_cast<float*>(values), value_bounds_.data());
    collectives_.wait_reductions(group_, Stream{});
  }
  void all_gather(float* data, const std::vector<int64_t>& bounds) override {
    collectives_.all_gather(group_, Stream{}, data, bounds.data());
  }
  void reduce_scatter_sum(float* data, const std::vector<int64_t>& bounds) override {
    collectives_.reduce_scatter_sum(group_, Stream{}, data, bounds.data());
  }
  void wait() override { collectives_.wait_reductions(group_, Stream{}); }

 private:
  const CollectiveOps& collectives_;
  const ShardLayout& shards_;
  const bool zero_;
  DeviceGroup* group_ = nullptr;
  std::vector<int64_t> value_bounds_;
};

}  // namespace

void require_gradient_sync(const Device& device, const Comm& comm) {
  if (comm.world_size() > 1 && !device.collectives && &device != &cpu_device())
    throw BadInput(fmt::format("train.device = \"{}\" on {} ranks needs collectives over its memory (NCCL), which "
                               "its backend library was built without (meson -Dnccl=disabled, or no NCCL found)",
                               device.name, comm.world_size()));
}

std::unique_ptr<GradientSync> make_gradient_sync(const Device& device, Comm& comm, const ShardLayout& shards,
                                                 bool zero) {
  require_gradient_sync(device, comm);
  if (comm.world_size() == 1) return std::make_unique<NoSync>();
  if (device.collectives) return std::make_unique<DeviceCollectiveSync>(*device.collectives, comm, shards, zero);
  return std::make_unique<MpiSync>(comm, shards, zero);
}

}  // namespace trainctl

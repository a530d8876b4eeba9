// Where a model's parameters, their bf16 compute copy and their gradients are held on this rank,
// and how a pass through the model's layers reaches them (model.h's seam: a kind declares its
// layers, the store gathers and reduces them; no kind calls a collective).
//   Whole (train.zero 0 and 1, and every model outside training): the three are flat buffers of
//   the whole layout, and a slice is at its offset in them.
//   Sharded (train.zero 2 and 3, FSDP2's design over the flat data-parallel shards of
//   runtime/shard_layout.h, the shards ZeRO-1 steps and sharded checkpoints save):
//     - gradients (zero >= 2): a rank keeps its shard of the summed gradients. Backward writes a
//       layer's gradients into a buffer of the layer's size, which is reduce-scattered once the
//       layer is done (gradients_done) and then added into the shard, so no gradient buffer of
//       the whole model exists; two such buffers take turns, so that one layer's reduction runs
//       while backward computes the next, plus one for the kept layer.
//     - parameters (zero 3): a rank keeps its shard of the fp32 masters only. Before a layer's
//       forward, and again before its backward, the layer's weights are all-gathered into one of
//       two buffers that take turns (with reshard_after_forward = false, one buffer per layer, so
//       that backward finds them all); with them gathered, the next layer's gather is issued on
//       the collectives' stream (prefetch), so that on a GPU it overlaps this layer's compute. A
//       gather writes a buffer only after the compute queued before it, which read the layer the
//       buffer held, so at most two layers' gathered weights are alive at once, besides the kept
//       layer's. With precision bf16 the gathered fp32 weights are converted to bf16 on the
//       device for the GEMMs: the LayerNorms and embeddings read fp32 weights, so the gather
//       carries fp32 (twice the bytes of a bf16 gather) and no bf16 copy is kept beside the shard.
// A layer is a run of adjacent slices of the layout (parameter_layout.h); the kept layer
// (kKeptLayer) is what a model uses at both ends of a pass, such as GPT-2's token embedding, its
// head too: gathered once per step, and its gradients reduced once backward is through.
//
// Every rank makes the same calls in the same order (the collectives pair up across ranks in
// that order): a pass enters its layers as forward and backward reach them, and the trainer ends
// a step's backward with finish_gradients().
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "device.h"
#include "device_buffer.h"
#include "parameter_layout.h"

namespace trainctl {

// How a training run shards the state (train.zero 2 or 3).
struct ParameterSharding {
  int64_t zero = 2;
  bool reshard_after_forward = true;
  int rank = 0;
  std::vector<int64_t> bounds;  // rank r holds [bounds[r], bounds[r + 1]) of the flat state
};

// The collectives a sharded store needs, over buffers laid out alike on every rank (rank r's part
// [bounds[r], bounds[r + 1]), bounds of ranks + 1 entries): the runtime's, over MPI or the
// device's collectives. Each starts once the work queued on the model's stream so far is done
// and runs on a stream of its own; the host need not wait.
class LayerCollectives {
 public:
  virtual ~LayerCollectives() = default;
  // Every rank's part of `data` becomes that rank's values, bit for bit.
  virtual void all_gather(float* data, const std::vector<int64_t>& bounds) = 0;
  // This rank's part becomes the sum over the ranks of theirs (the rest is then undefined).
  virtual void reduce_scatter_sum(float* data, const std::vector<int64_t>& bounds) = 0;
  // The work queued on the model's stream from now on waits for every collective started so far.
  virtual void wait() = 0;
};

enum class Pass { kForward, kBackward };

class ParameterStore {
 public:
  // Whole without `sharding`. Allocates what this rank holds.
  ParameterStore(const Device& device, Stream stream, ElementType compute_type,
                 const std::vector<ParameterSlice>& layout, const std::optional<ParameterSharding>& sharding);
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // Until they are set, a sharded store gathers and reduces nothing: set before the first pass.
  void set_collectives(LayerCollectives* collectives) { collectives_ = collectives; }

  int64_t count() const { return count_; }  // of the flat layout
  // The ranges of the flat state whose fp32 masters and gradients this rank holds (all of it, or
  // its shard), and those buffers, element 0 being the range's first.
  FlatRange held_parameters() const { return held_parameters_; }
  FlatRange held_gradients() const { return held_gradients_; }
  // To write: whatever is derived from the masters (the compute copy, gathered layers) is made
  // again before it is read next.
  float* parameters();
  const float* parameter_values() const { return parameters_.get(); }
  float* gradients() { return gradients_.get(); }
  // The start of a step's gradients: whole, the buffer is zeroed; sharded, each layer's first
  // reduction of the step overwrites its part of the shard, and later ones add to it.
  void zero_gradients();
  // What the optimizer steps from element `begin` of the flat state on (within what this rank
  // holds): the masters, their gradients and the compute copy (none in fp32, or with zero = 3),
  // which it writes in the same pass. Gathered layers are made again from the stepped masters.
  struct OptimizerTarget {
    float* parameters;
    const float* gradients;
    TypedPtr compute_copy;
  };
  OptimizerTarget optimizer_target(int64_t begin);

  // --- a pass (sharded: the collectives; whole: nothing) -------------------------------------
  // Before the work of `layer` in `pass` is queued: its weights (zero 3) are gathered, or their
  // gather waited for, and the next layer's is issued; the reductions of layers done before are
  // issued or taken into the shard.
  void enter_layer(int layer, Pass pass);
  // A slice's fp32 weights, the weights its GEMMs read (bf16 with a compute copy), and its
  // gradients (added into: a layer's gradient buffer is zeroed when its first slice is asked for
  // in a pass). With zero = 3, valid from enter_layer of its layer until another layer takes the
  // buffer (two layers later in the same pass).
  const float* weights(const ParameterSlice& slice);
  ConstTypedPtr compute_weights(const ParameterSlice& slice);
  float* gradient(const ParameterSlice& slice);
  // Where a layer (ParameterSlice::layer) lies in the flat layout.
  const FlatRange& layer_range(int layer) const;
  // Backward has finished `layer`'s gradients for this micro-batch.
  void gradients_done(int layer);
  // After a step's last backward pass: work queued from now on sees the reduced gradients in
  // gradients(). Nothing for a whole store.
  void finish_gradients();

 private:
  static constexpr int kNoLayer = -2;
  // A layer's gathered weights (zero 3) or gradients (zero >= 2), in a buffer that layers take
  // turns in: `layer` is the one it holds.
  struct LayerBuffer {
    DeviceBuffer<float> values;
    TypedBuffer compute;     // bf16 weights, converted from `values`
    int layer = kNoLayer;
    bool current = false;    // weights: gathered since the masters last changed; gradients: open in a pass
    bool converted = false;  // weights: `compute` made from `values`
  };

  size_t index_of(int layer) const;  // the kept layer's is after the numbered ones'
  const std::vector<int64_t>& bounds_of(int layer) const;
  LayerBuffer& weight_buffer(int layer);
  LayerBuffer& gradient_buffer(int layer);
  bool gathers() const { return sharding_ && sharding_->zero == 3; }
  void gather(int layer);
  void prefetch_after(int layer, Pass pass);
  void issue_reductions();
  void take_reductions();
  void invalidate_gathered();

  const Device& device_;
  Stream stream_;
  ElementType compute_type_;
  int64_t count_ = 0;
  ModelLayers layers_;
  std::optional<ParameterSharding> sharding_;
  LayerCollectives* collectives_ = nullptr;
  FlatRange held_parameters_, held_gradients_;
  DeviceBuffer<float> parameters_, gradients_;
  // Whole or zero = 2 in bf16: the GEMMs' copy of every parameter.
  TypedBuffer compute_copy_;
  bool compute_copy_stale_ = false;
  // Sharded: each layer's part of every rank's shard (layer-relative bounds), the kept layer's last.
  std::vector<std::vector<int64_t>> layer_bounds_;
  // Zero 3: the gathered weights' buffers, then the kept layer's; zero >= 2: the gradients'.
  std::vector<LayerBuffer> weight_buffers_, gradient_buffers_;
  std::vector<int> reductions_pending_, reductions_issued_;  // layers, in the order they were done
  std::vector<bool> reduced_this_step_;                      // by layer, the kept layer's last
};

}  // namespace trainctl

// A model's parameters, compute copy and gradients on this rank, whole or sharded: see
// parameter_store.h.
#include "parameter_store.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace trainctl {

ParameterStore::ParameterStore(const Device& device, Stream stream, ElementType compute_type,
                               const std::vector<ParameterSlice>& layout,
                               const std::optional<ParameterSharding>& sharding)
    : device_(device),
      stream_(stream),
      compute_type_(compute_type),
      count_(flat_count(layout)),
      layers_(model_layers(layout)),
      sharding_(sharding) {
  held_parameters_ = held_gradients_ = {0, count_};
  if (sharding_) {
    const auto rank = static_cast<size_t>(sharding_->rank);
    const FlatRange shard{sharding_->bounds[rank], sharding_->bounds[rank + 1]};
    held_gradients_ = shard;
    if (gathers()) held_parameters_ = shard;
    std::vector<FlatRange> ranges = layers_.layers;
    if (layers_.kept) ranges.push_back(*layers_.kept);
    int64_t largest = 0;
    for (const FlatRange& range : layers_.layers) largest = std::max(largest, range.count());
    for (const FlatRange& range : ranges) {
      std::vector<int64_t>& bounds = layer_bounds_.emplace_back();
      for (int64_t bound : sharding_->bounds) bounds.push_back(std::clamp(bound, range.begin, range.end) - range.begin);
    }
    reduced_this_step_.assign(ranges.size(), false);
    // Two buffers take turns (one where the model has a single layer); the kept layer has its own.
    const auto layer_count = static_cast<int64_t>(layers_.layers.size());
    const auto buffers = [&](std::vector<LayerBuffer>& into, int64_t turns, bool weights) {
      for (int64_t b = 0; b < turns; ++b) into.emplace_back().values = DeviceBuffer<float>(device, largest);
      if (layers_.kept) into.emplace_back().values = DeviceBuffer<float>(device, layers_.kept->count());
      if (!weights || compute_type_ == ElementType::kF32) return;
      for (LayerBuffer& buffer : into) buffer.compute = TypedBuffer(device, compute_type_, buffer.values.size());
    };
    buffers(gradient_buffers_, std::min<int64_t>(2, layer_count), false);
    if (gathers())
      buffers(weight_buffers_, sharding_->reshard_after_forward ? std::min<int64_t>(2, layer_count) : layer_count,
              true);
  }
  parameters_ = DeviceBuffer<float>(device, held_parameters_.count());
  gradients_ = DeviceBuffer<float>(device, held_gradients_.count());
  if (compute_type_ != ElementType::kF32 && !gathers()) compute_copy_ = TypedBuffer(device, compute_type_, count_);
  device_.memory.fill_zero(stream_, gradients_.get(), static_cast<size_t>(gradients_.size()) * sizeof(float));
}

float* ParameterStore::parameters() {
  compute_copy_stale_ = compute_copy_.size() > 0;
  invalidate_gathered();
  return parameters_.get();
}

void ParameterStore::zero_gradients() {
  if (sharding_)
    std::fill(reduced_this_step_.begin(), reduced_this_step_.end(), false);
  else
    device_.memory.fill_zero(stream_, gradients_.get(), static_cast<size_t>(gradients_.size()) * sizeof(float));
}

ParameterStore::OptimizerTarget ParameterStore::optimizer_target(int64_t begin) {
  invalidate_gathered();
  return {parameters_.get() + (begin - held_parameters_.begin), gradients_.get() + (begin - held_gradients_.begin),
          compute_copy_.size() > 0 ? compute_copy_.get() + begin : TypedPtr{}};
}

void ParameterStore::invalidate_gathered() {
  for (LayerBuffer& buffer : weight_buffers_) buffer.current = false;
}

const FlatRange& ParameterStore::layer_range(int layer) const {
  return layer == kKeptLayer ? *layers_.kept : layers_.layers[static_cast<size_t>(layer)];
}

const std::vector<int64_t>& ParameterStore::bounds_of(int layer) const { return layer_bounds_[index_of(layer)]; }

size_t ParameterStore::index_of(int layer) const {
  return layer == kKeptLayer ? layers_.layers.size() : static_cast<size_t>(layer);
}

namespace {
// The buffer a layer takes its turn in: the kept layer's own (the last), or one of the others.
template <typename Buffers>
auto& turn_of(Buffers& buffers, int layer, bool has_kept) {
  if (layer == kKeptLayer) return buffers.back();
  const size_t turns = buffers.size() - (has_kept ? 1 : 0);
  return buffers[static_cast<size_t>(layer) % turns];
}
}  // namespace

ParameterStore::LayerBuffer& ParameterStore::weight_buffer(int layer) {
  return turn_of(weight_buffers_, layer, layers_.kept.has_value());
}

ParameterStore::LayerBuffer& ParameterStore::gradient_buffer(int layer) {
  return turn_of(gradient_buffers_, layer, layers_.kept.has_value());
}

void ParameterStore::enter_layer(int layer, Pass pass) {
  if (!sharding_) return;
  if (collectives_ == nullptr) throw std::logic_error("a sharded model's pass before its collectives were set");
  const LayerBuffer* weights = gathers() ? &weight_buffer(layer) : nullptr;
  if (weights && !(weights->layer == layer && weights->current)) gather(layer);
  collectives_->wait();
  take_reductions();
  // Issued only now, so that this layer's compute waits for its gather and not for them.
  issue_reductions();
  if (!weights) return;
  LayerBuffer& buffer = weight_buffer(layer);
  if (compute_type_ != ElementType::kF32 && !buffer.converted) {
    device_.memory.convert(stream_, buffer.compute.get(), buffer.values.get(), layer_range(layer).count());
    buffer.converted = true;
  }
  prefetch_after(layer, pass);
}

// This rank's part of the layer from its shard of the masters, then everyone's.
void ParameterStore::gather(int layer) {
  LayerBuffer& buffer = weight_buffer(layer);
  const FlatRange& range = layer_range(layer);
  const int64_t first = std::max(range.begin, held_parameters_.begin);
  const int64_t last = std::min(range.end, held_parameters_.end);
  if (first < last)
    device_.memory.copy(stream_, buffer.values.get() + (first - range.begin),
                        parameters_.get() + (first - held_parameters_.begin),
                        static_cast<size_t>(last - first) * sizeof(float));
  collectives_->all_gather(buffer.values.get(), bounds_of(layer));
  buffer.layer = layer;
  buffer.current = true;
  buffer.converted = false;
}

// The layer the pass enters next. Its buffer holds a layer two before it in the pass, whose
// compute is queued already, or one never to be read again.
void ParameterStore::prefetch_after(int layer, Pass pass) {
  const auto count = static_cast<int>(layers_.layers.size());
  int next = pass == Pass::kForward ? layer + 1 : layer - 1;
  if (layer == kKeptLayer) next = pass == Pass::kForward ? 0 : -1;
  if (next < 0 || next >= count) return;
  const LayerBuffer& buffer = weight_buffer(next);
  if (!(buffer.layer == next && buffer.current)) gather(next);
}

void ParameterStore::issue_reductions() {
  for (int layer : reductions_pending_) {
    collectives_->reduce_scatter_sum(gradient_buffer(layer).values.get(), bounds_of(layer));
    reductions_issued_.push_back(layer);
  }
  reductions_pending_.clear();
}

// After a wait for the collectives: each issued reduction's part of this rank goes into the
// shard, the first of the step over what it held, and the buffer is free.
void ParameterStore::take_reductions() {
  const auto rank = static_cast<size_t>(sharding_->rank);
  for (int layer : reductions_issued_) {
    LayerBuffer& buffer = gradient_buffer(layer);
    const std::vector<int64_t>& bounds = bounds_of(layer);
    const int64_t count = bounds[rank + 1] - bounds[rank];
    float* shard = gradients_.get() + (layer_range(layer).begin + bounds[rank] - held_gradients_.begin);
    const float* reduced = buffer.values.get() + bounds[rank];
    const size_t index = index_of(layer);
    if (count > 0 && reduced_this_step_[index])
      device_.elementwise.add(stream_, shard, shard, reduced, count);
    else if (count > 0)
      device_.memory.copy(stream_, shard, reduced, static_cast<size_t>(count) * sizeof(float));
    reduced_this_step_[index] = true;
    buffer.layer = kNoLayer;
  }
  reductions_issued_.clear();
}

const float* ParameterStore::weights(const ParameterSlice& slice) {
  if (!gathers()) return parameters_.get() + slice.offset;
  const LayerBuffer& buffer = weight_buffer(slice.layer);
  if (buffer.layer != slice.layer || !buffer.current)
    throw std::logic_error(fmt::format("{} is read outside its layer's turn (enter_layer)", slice.name));
  return buffer.values.get() + (slice.offset - layer_range(slice.layer).begin);
}

ConstTypedPtr ParameterStore::compute_weights(const ParameterSlice& slice) {
  if (compute_type_ == ElementType::kF32) return weights(slice);
  if (gathers()) {
    weights(slice);
    return weight_buffer(slice.layer).compute.get() + (slice.offset - layer_range(slice.layer).begin);
  }
  if (compute_copy_stale_) {
    device_.memory.convert(stream_, compute_copy_.get(), parameters_.get(), count_);
    compute_copy_stale_ = false;
  }
  return compute_copy_.get() + slice.offset;
}

float* ParameterStore::gradient(const ParameterSlice& slice) {
  if (!sharding_) return gradients_.get() + slice.offset;
  LayerBuffer& buffer = gradient_buffer(slice.layer);
  const FlatRange& range = layer_range(slice.layer);
  if (buffer.layer != slice.layer || !buffer.current) {
    // The buffer's last layer must be reduced and taken first (in a pass's order it already is).
    if (buffer.layer != kNoLayer) {
      issue_reductions();
      collectives_->wait();
      take_reductions();
    }
    device_.memory.fill_zero(stream_, buffer.values.get(), static_cast<size_t>(range.count()) * sizeof(float));
    buffer.layer = slice.layer;
    buffer.current = true;
  }
  return buffer.values.get() + (slice.offset - range.begin);
}

void ParameterStore::gradients_done(int layer) {
  if (!sharding_) return;
  gradient_buffer(layer).current = false;
  reductions_pending_.push_back(layer);
}

void ParameterStore::finish_gradients() {
  if (!sharding_) return;
  issue_reductions();
  collectives_->wait();
  take_reductions();
}

}  // namespace trainctl

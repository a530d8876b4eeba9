// The model seam's footprint, its store and loss totals: see model.h.
#include "model.h"

#include <algorithm>

namespace trainctl {

ModelFootprint parameter_footprint(const std::vector<ParameterSlice>& tensors, Precision precision) {
  ModelFootprint footprint;
  footprint.parameters = flat_count(laid_out(tensors));
  for (const ParameterSlice& tensor : tensors)
    footprint.largest_tensor = std::max(footprint.largest_tensor, element_count(tensor.shape));
  const ModelLayers layers = model_layers(laid_out(tensors));
  for (const FlatRange& layer : layers.layers) footprint.largest_layer = std::max(footprint.largest_layer, layer.count());
  footprint.kept_layer = layers.kept ? layers.kept->count() : 0;
  footprint.layers = static_cast<int64_t>(layers.layers.size());
  // As Model::set_layout allocates.
  if (precision == Precision::kBf16) {
    footprint.activation_type = ElementType::kBf16;
    footprint.compute_copy_bytes = footprint.parameters * static_cast<int64_t>(element_bytes(ElementType::kBf16));
  }
  footprint.activation_bytes = sizeof(BatchResult);
  return footprint;
}

void Model::set_layout(std::vector<ParameterSlice> slices) {
  layout_ = laid_out(std::move(slices));
  store_ = std::make_unique<ParameterStore>(device_, stream_, activation_type_, layout_, sharding_);
  totals_ = DeviceBuffer<BatchResult>(device_, 1);
}

void Model::upload_parameters(const std::vector<float>& host) {
  const FlatRange held = held_parameters();
  device_.memory.upload(stream_, parameters(), host.data() + held.begin,
                        static_cast<size_t>(held.count()) * sizeof(float));
}

void Model::layer_gradients_done(int layer, const LayerDone& layer_done) {
  store_->gradients_done(layer);
  if (!layer_done) return;
  const FlatRange& range = store_->layer_range(layer);
  layer_done(range.begin, range.count());
}

BatchResult* Model::zeroed_totals() {
  device_.memory.fill_zero(stream_, totals_.get(), sizeof(BatchResult));
  return totals_.get();
}

BatchResult Model::read_totals(const BatchResult* totals) {
  BatchResult result;
  device_.memory.download(stream_, &result, totals, sizeof(BatchResult));
  return result;
}

BatchResult Model::forward_backward(const Batch& batch, float grad_scale, const LayerDone& layer_done) {
  BatchResult* totals = zeroed_totals();
  forward_backward_into(batch, grad_scale, totals, layer_done);
  return read_totals(totals);
}

BatchResult Model::evaluate(const Batch& batch) {
  BatchResult* totals = zeroed_totals();
  evaluate_into(batch, totals);
  return read_totals(totals);
}

}  // namespace trainctl

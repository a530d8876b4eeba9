// The model seam's flat layout, shared parameter storage, compute copy and loss totals: see model.h.
#include "model.h"

#include <algorithm>

namespace trainctl {

std::vector<ParameterSlice> laid_out(std::vector<ParameterSlice> slices) {
  int64_t offset = 0;
  for (ParameterSlice& slice : slices) {
    slice.count = element_count(slice.shape);
    slice.offset = offset;
    offset += slice.count + slice.padding;
  }
  return slices;
}

ModelFootprint parameter_footprint(const std::vector<ParameterSlice>& tensors, Precision precision) {
  ModelFootprint footprint;
  footprint.parameters = flat_count(laid_out(tensors));
  for (const ParameterSlice& tensor : tensors)
    footprint.largest_tensor = std::max(footprint.largest_tensor, element_count(tensor.shape));
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
  const int64_t count = flat_count(layout_);
  parameters_ = DeviceBuffer<float>(device_, count);
  gradients_ = DeviceBuffer<float>(device_, count);
  if (activation_type_ == ElementType::kBf16) compute_copy_ = TypedBuffer(device_, ElementType::kBf16, count);
  totals_ = DeviceBuffer<BatchResult>(device_, 1);
  zero_gradients();
}

void Model::upload_parameters(const std::vector<float>& host) {
  device_.memory.upload(stream_, parameters(), host.data(), host.size() * sizeof(float));
}

ConstTypedPtr Model::compute_parameters() {
  if (compute_copy_.size() == 0) return parameters_.get();
  if (compute_copy_stale_) {
    device_.memory.convert(stream_, compute_copy_.get(), parameters_.get(), parameters_.size());
    compute_copy_stale_ = false;
  }
  return compute_copy_.get();
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

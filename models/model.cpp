// The model seam's shared parameter storage, compute copy and loss totals: see model.h.
#include "model.h"

namespace trainctl {

void Model::set_layout(std::vector<ParameterSlice> slices) {
  int64_t offset = 0;
  for (ParameterSlice& slice : slices) {
    slice.count = 1;
    for (int64_t extent : slice.shape) slice.count *= extent;
    slice.offset = offset;
    offset += slice.count + slice.padding;
  }
  layout_ = std::move(slices);
  parameters_ = DeviceBuffer<float>(device_, offset);
  gradients_ = DeviceBuffer<float>(device_, offset);
  if (activation_type_ == ElementType::kBf16) compute_copy_ = TypedBuffer(device_, ElementType::kBf16, offset);
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

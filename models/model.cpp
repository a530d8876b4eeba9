// The model seam's shared parameter storage: see model.h.
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
  zero_gradients();
}

void Model::upload_parameters(const std::vector<float>& host) {
  device_.memory.upload(stream_, parameters_.get(), host.data(), host.size() * sizeof(float));
}

}  // namespace trainctl

// A model's flat parameter layout and its layers: see parameter_layout.h.
#include "parameter_layout.h"

#include <stdexcept>

#include <fmt/format.h>

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

namespace {
// `range`, of `slice`, joins the layer's `run`, which it must follow directly.
FlatRange joined(const FlatRange& run, const FlatRange& range, const ParameterSlice& slice) {
  if (run.end != range.begin)
    throw std::logic_error(fmt::format("{} is not adjacent to the rest of its layer {}", slice.name, slice.layer));
  return {run.begin, range.end};
}
}  // namespace

ModelLayers model_layers(const std::vector<ParameterSlice>& layout) {
  ModelLayers layers;
  for (const ParameterSlice& slice : layout) {
    const FlatRange range{slice.offset, slice.offset + slice.count + slice.padding};
    const auto numbered = static_cast<int>(layers.layers.size());
    if (slice.layer == kKeptLayer)
      layers.kept = layers.kept ? joined(*layers.kept, range, slice) : range;
    else if (slice.layer == numbered)
      layers.layers.push_back(range);
    else if (slice.layer + 1 == numbered)
      layers.layers.back() = joined(layers.layers.back(), range, slice);
    else
      throw std::logic_error(fmt::format("{} is in layer {}, after layer {}: layers are numbered from 0 in "
                                         "layout order",
                                         slice.name, slice.layer, numbered - 1));
  }
  return layers;
}

}  // namespace trainctl

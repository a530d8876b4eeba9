// A model's parameters as one flat layout: the named tensors (ParameterSlice) one after another
// in the order PyTorch's state_dict has them, each followed by its padding, and the layers they
// form, the units that train.zero 2 and 3 gather and reduce (models/parameter_store.h).
#pragma once

#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace trainctl {

// ParameterSlice::layer of what a model uses at both ends of a pass, such as GPT-2's token
// embedding, which is also its head.
constexpr int kKeptLayer = -1;

struct ParameterSlice {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t count = 0;
  bool decay = true;  // takes weight decay (AdamW's first parameter group)
  // Elements after the tensor in the flat buffers that belong to no named tensor, so checkpoints
  // never hold them: GPT-2's vocabulary rows padded for the GEMMs. They stay zero (no gradient
  // reaches them, and the optimizer steps only the named tensors).
  int64_t padding = 0;
  // The layer the tensor belongs to: numbered from 0 in the order the forward pass uses them, a
  // layer's tensors adjacent in the layout, or kKeptLayer. The unit that train.zero = 3 gathers
  // before use and zero 2 and 3 reduce-scatter as backward finishes it.
  int layer = 0;
};

// The elements of a tensor of `shape`.
inline int64_t element_count(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// The slices with their offsets and counts, one after another in order, each followed by its
// padding: the flat layout of a model's parameters.
std::vector<ParameterSlice> laid_out(std::vector<ParameterSlice> slices);
// The floats of a flat buffer of `layout`, the padding included.
inline int64_t flat_count(const std::vector<ParameterSlice>& layout) {
  return layout.empty() ? 0 : layout.back().offset + layout.back().count + layout.back().padding;
}

// Elements [begin, end) of the flat layout.
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t count() const { return end - begin; }
};

// A model's layers from its layout: each numbered layer's range, in forward order, and the kept
// layer's. Throws std::logic_error for a layout whose layers are not runs of adjacent slices
// numbered from 0, or that leave a slice out.
struct ModelLayers {
  std::vector<FlatRange> layers;
  std::optional<FlatRange> kept;
};
ModelLayers model_layers(const std::vector<ParameterSlice>& layout);

}  // namespace trainctl

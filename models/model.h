// The model seam. A model owns its parameters and gradients as two flat device buffers of one
// layout, so that one all-reduce and one optimizer pass cover it; parameter_layout() names the
// slices as PyTorch's state_dict does (names, shapes, and which take weight decay). The trainer
// drives any model through this interface and never names one (models/registry.h builds them).
#pragma once

#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "batch.h"
#include "device.h"
#include "device_buffer.h"

namespace trainctl {

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
};

// The elements of a tensor of `shape`.
inline int64_t element_count(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

struct BatchResult {
  double loss_sum = 0.0;  // summed over loss terms (rows, or tokens), not averaged
  int64_t correct = 0;    // terms whose argmax is the target
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::vector<ParameterSlice>& parameter_layout() const { return layout_; }
  int64_t parameter_count() const { return parameters_.size(); }
  float* parameters() { return parameters_.get(); }
  float* gradients() { return gradients_.get(); }
  void zero_gradients() { device_.memory.fill_zero(stream_, gradients_.get(), gradients_.size()); }
  const Device& device() const { return device_; }

  // Deterministic initialisation from `seed` (the same weights on every rank and device).
  virtual void init_parameters(uint64_t seed) = 0;

  // Called during backward as soon as a slice of gradients() is final for this micro-batch:
  // [offset, offset + count). Later layers come first; together the calls cover every parameter
  // exactly once.
  using LayerDone = std::function<void(int64_t offset, int64_t count)>;

  // Adds d(loss_sum * grad_scale)/dparams into gradients(), telling `layer_done` (when set)
  // about each slice as it finishes.
  virtual BatchResult forward_backward(const Batch& batch, float grad_scale, const LayerDone& layer_done = {}) = 0;
  virtual BatchResult evaluate(const Batch& batch) = 0;

  // Loss terms per example: the mean loss is loss_sum / (examples * this) (1 for a classifier,
  // block_size tokens for a language model).
  virtual int64_t loss_terms_per_example() const = 0;
  // What a loss term is, for throughput: "samples" or "tokens".
  virtual const char* term_unit() const = 0;
  // Training FLOPs (forward and backward) per loss term, for MFU estimates.
  virtual double training_flops_per_term() const = 0;

 protected:
  Model(const Device& device, Stream stream) : device_(device), stream_(stream) {}
  // Sets the layout (offsets assigned in order) and allocates parameters and gradients for it.
  void set_layout(std::vector<ParameterSlice> slices);
  // The host values of the parameters, uploaded by init_parameters.
  void upload_parameters(const std::vector<float>& host);

  const Device& device_;
  Stream stream_;

 private:
  std::vector<ParameterSlice> layout_;
  DeviceBuffer<float> parameters_, gradients_;
};

// A model that predicts the next token, which `trainctl sample` can decode from.
class LanguageModel : public Model {
 public:
  virtual int64_t vocab_size() const = 0;
  virtual int64_t context_size() const = 0;
  // logits [vocab_size] of the token after tokens[0, length), 1 <= length <= context_size().
  virtual void next_token_logits(const int32_t* tokens, int64_t length, float* logits) = 0;

 protected:
  using Model::Model;
};

}  // namespace trainctl

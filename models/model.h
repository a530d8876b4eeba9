// The model seam. A model's parameters and gradients are two flat buffers of one layout, so that
// one reduction and one optimizer pass cover them; parameter_layout() names the slices as
// PyTorch's state_dict does (names, shapes, which take weight decay) and groups them into layers.
// The trainer drives any model through this interface and never names one (models/registry.h
// builds them).
//
// The parameters and their gradients are fp32. With train.precision = "bf16" the GEMMs read a
// bf16 copy of the parameters (the compute copy): the optimizer writes it in the pass that steps
// the parameters, and whoever else may write them (parameters()) makes the copy be made again
// before the next forward pass. Its activations and their gradients are then bf16 too
// (activation_type).
//
// The store (parameter_store.h) holds them, whole or, in training with train.zero 2 and 3,
// sharded across the ranks. A kind reaches its weights and gradients only through a pass: it
// enters each layer (enter_layer) before queuing the layer's forward or backward work, reads a
// slice's weights and gradients through weights_of, compute_weights_of and gradient_of, and says
// when backward is through with a layer's gradients (layer_gradients_done). Collectives are the
// store's; no kind calls one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "batch.h"
#include "train_spec.h"
#include "device.h"
#include "device_buffer.h"
#include "parameter_layout.h"
#include "parameter_store.h"

namespace trainctl {

// Allocates a model's device buffers, or only counts their bytes (device null): one plan, which
// the model's constructor allocates with and its footprint (`trainctl estimate`) counts with, so
// the two cannot disagree.
class BufferPlan {
 public:
  BufferPlan(const Device* device, ElementType activation_type) : device_(device), activation_type_(activation_type) {}

  template <typename T>
  DeviceBuffer<T> buffer(int64_t count) {
    bytes_ += count * static_cast<int64_t>(sizeof(T));
    return device_ != nullptr ? DeviceBuffer<T>(*device_, count) : DeviceBuffer<T>();
  }
  // Of the activations' element type.
  TypedBuffer activations(int64_t count) {
    bytes_ += count * static_cast<int64_t>(element_bytes(activation_type_));
    return device_ != nullptr ? TypedBuffer(*device_, activation_type_, count) : TypedBuffer();
  }
  ElementType activation_type() const { return activation_type_; }
  int64_t bytes() const { return bytes_; }

 private:
  const Device* device_;
  ElementType activation_type_;
  int64_t bytes_ = 0;
};

// A batch's loss, as the loss op accumulates it on the device and the host reads it.
struct BatchResult {
  double loss_sum = 0.0;  // summed over loss terms (rows, or tokens), not averaged
  int64_t correct = 0;    // terms whose argmax is the target
};

struct ModelOptions {
  int64_t max_examples = 1;  // the largest batch (micro_batch) forward_backward and evaluate get
  Precision precision = Precision::kFp32;
  bool recompute = false;
  Stream stream{};
  // Training with train.zero 2 or 3: what this rank holds of the sharded state; none, whole.
  std::optional<ParameterSharding> sharding{};
};

// What a model of a spec holds and computes for given options, worked out without building it
// (`trainctl estimate`); tests/test_estimate.cpp holds it to what a built model allocates.
struct ModelFootprint {
  int64_t parameters = 0;      // floats of the parameter buffer; the gradient buffer has as many
  int64_t largest_tensor = 0;  // floats of the largest parameter tensor
  // Floats of the largest numbered layer and of the kept layer (ParameterSlice::layer), padding
  // included: the buffers of the layers train.zero 2 and 3 gather and reduce one at a time.
  int64_t largest_layer = 0;
  int64_t kept_layer = 0;
  int64_t layers = 0;  // numbered
  // What the activations and their gradients are stored in (bf16 for precision bf16).
  ElementType activation_type = ElementType::kF32;
  // The parameters' bf16 compute copy, for precision bf16.
  int64_t compute_copy_bytes = 0;
  // Every other device buffer the model allocates for options.max_examples examples: the
  // batch's device copy, activations and their gradients, the loss totals.
  int64_t activation_bytes = 0;
  // What the CPU ops keep for themselves beside those buffers (thread_local, grown to the
  // largest call and kept): operands widened from bf16, attention score matrices.
  int64_t cpu_scratch_bytes = 0;
  int64_t host_batch_bytes = 0;  // one micro-batch as the data seam hands it to the model
  int64_t terms_per_example = 1;          // Model::loss_terms_per_example()
  const char* term_unit = "samples";      // Model::term_unit()
  double training_flops_per_term = 0.0;   // Model::training_flops_per_term()
};

// A footprint with what Model itself allocates for a model of `tensors` (their shapes) in
// `precision`: the parameters, largest_tensor, the compute copy and the loss totals; the rest for
// the model kind to fill in.
ModelFootprint parameter_footprint(const std::vector<ParameterSlice>& tensors, Precision precision);

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::vector<ParameterSlice>& parameter_layout() const { return layout_; }
  int64_t parameter_count() const { return store_->count(); }  // of the flat layout
  // What this rank holds of the fp32 master parameters and of their gradients: the whole layout,
  // or with train.zero = 3 (the parameters) and 2 (the gradients) its shard; the buffers below
  // hold these ranges, element 0 being the range's first.
  FlatRange held_parameters() const { return store_->held_parameters(); }
  FlatRange held_gradients() const { return store_->held_gradients(); }
  // The fp32 master parameters, to write: the compute copy is made again before the next forward
  // pass (one conversion), since whoever asks may change them (a checkpoint's load, ZeRO-1's
  // gather).
  float* parameters() { return store_->parameters(); }
  const float* parameter_values() const { return store_->parameter_values(); }
  // What the optimizer steps, from element `begin` of the flat layout on: the master parameters,
  // their gradients and the compute copy (none, null data, in fp32 or with train.zero = 3), which
  // it writes in the same pass, so the copy stays current.
  using OptimizerTarget = ParameterStore::OptimizerTarget;
  OptimizerTarget optimizer_target(int64_t begin) { return store_->optimizer_target(begin); }
  float* gradients() { return store_->gradients(); }
  // Before a step's first micro-batch.
  void zero_gradients() { store_->zero_gradients(); }
  // Sharded training: the collectives the store gathers and reduces with, set before the first
  // pass; after a step's last micro-batch, finish_gradients() makes the work queued next see the
  // summed gradients of this rank's shard in gradients().
  void set_collectives(LayerCollectives* collectives) { store_->set_collectives(collectives); }
  void finish_gradients() { store_->finish_gradients(); }
  const Device& device() const { return device_; }
  // What the model stores its activations and their gradients in: f32, or bf16 for precision bf16.
  ElementType activation_type() const { return activation_type_; }

  // Deterministic initialisation from `seed` (the same weights on every rank and device).
  virtual void init_parameters(uint64_t seed) = 0;

  // Called during backward as soon as a layer's gradients are final for this micro-batch, with
  // the layer's slice of the layout [offset, offset + count). Later layers come first; together
  // the calls cover every parameter exactly once.
  using LayerDone = std::function<void(int64_t offset, int64_t count)>;

  // Adds d(loss_sum * grad_scale)/dparams into the gradients, telling `layer_done` (when set)
  // about each layer as it finishes, and the batch's loss and correct terms into *totals (device
  // memory); the host does not wait for the device.
  virtual void forward_backward_into(const Batch& batch, float grad_scale, BatchResult* totals,
                                     const LayerDone& layer_done = {}) = 0;
  // The batch's loss and correct terms into *totals (device memory), without gradients.
  virtual void evaluate_into(const Batch& batch, BatchResult* totals) = 0;
  // The same for one batch, waiting for its result (a host synchronisation).
  BatchResult forward_backward(const Batch& batch, float grad_scale, const LayerDone& layer_done = {});
  BatchResult evaluate(const Batch& batch);

  // Loss terms per example: the mean loss is loss_sum / (examples * this) (1 for a classifier,
  // block_size tokens for a language model).
  virtual int64_t loss_terms_per_example() const = 0;
  // What a loss term is, for throughput: "samples" or "tokens".
  virtual const char* term_unit() const = 0;
  // Training FLOPs (forward and backward) per loss term, for MFU estimates.
  virtual double training_flops_per_term() const = 0;

 protected:
  Model(const Device& device, const ModelOptions& options)
      : device_(device),
        stream_(options.stream),
        activation_type_(options.precision == Precision::kBf16 ? ElementType::kBf16 : ElementType::kF32),
        sharding_(options.sharding) {}
  // Sets the layout (laid_out) and makes the store of its parameters and gradients.
  void set_layout(std::vector<ParameterSlice> slices);
  // The host values of the parameters, uploaded by init_parameters (this rank's part of them).
  void upload_parameters(const std::vector<float>& host);
  // A pass (see the top of this file): before queuing a layer's work.
  void enter_layer(int layer, Pass pass) { store_->enter_layer(layer, pass); }
  // A slice's fp32 weights; what its GEMMs read (the compute copy in bf16); its gradients, which
  // the pass adds into.
  const float* weights_of(const ParameterSlice& slice) { return store_->weights(slice); }
  ConstTypedPtr compute_weights_of(const ParameterSlice& slice) { return store_->compute_weights(slice); }
  float* gradient_of(const ParameterSlice& slice) { return store_->gradient(slice); }
  // Backward is through with `layer`'s gradients for this micro-batch; tells `layer_done`.
  void layer_gradients_done(int layer, const LayerDone& layer_done);
  // Zeroed device totals for forward_backward and evaluate.
  BatchResult* zeroed_totals();
  BatchResult read_totals(const BatchResult* totals);

  const Device& device_;
  Stream stream_;

 private:
  ElementType activation_type_;
  std::optional<ParameterSharding> sharding_;
  std::vector<ParameterSlice> layout_;
  std::unique_ptr<ParameterStore> store_;
  DeviceBuffer<BatchResult> totals_;
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

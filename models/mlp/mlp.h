// The MLP classifier: torch.nn.Sequential(Linear, Act, Linear, Act, ..., Linear) with softmax
// cross-entropy, on the device seam. Its layout names the slices as that Sequential's state_dict
// does ("0.weight" [out, in], "0.bias", "2.weight", ...); every tensor takes weight decay, as
// torch.optim does with one parameter group. Batches hold "x" float32 [rows, inputs] and "y"
// int32 [rows].
#pragma once

#include <memory>
#include <vector>

#include "mlp_spec.h"
#include "model.h"

namespace trainctl {

class Mlp : public Model {
 public:
  Mlp(const MlpSpec& spec, const Device& device, const ModelOptions& options);

  // PyTorch's default nn.Linear init: weight and bias uniform in +-1/sqrt(in_features).
  void init_parameters(uint64_t seed) override;
  void forward_backward_into(const Batch& batch, float grad_scale, BatchResult* totals,
                             const LayerDone& layer_done = {}) override;
  void evaluate_into(const Batch& batch, BatchResult* totals) override;
  int64_t loss_terms_per_example() const override { return 1; }
  const char* term_unit() const override { return "samples"; }
  double training_flops_per_term() const override;

  // The device buffers for `options`, allocated (device given) or only counted (null).
  struct Buffers {
    TypedBuffer input;
    DeviceBuffer<int32_t> labels;
    // Per layer, [max_rows, out]: the pre-activations, and the activations where the layer has
    // one (the last layer's pre-activations are the logits, then their gradient).
    std::vector<TypedBuffer> pre_activations, activations;
    TypedBuffer grad_a, grad_b;  // ping-pong, [max_rows, widest]
  };
  static Buffers plan_buffers(const MlpSpec& spec, const ModelOptions& options, BufferPlan& plan);

 private:
  struct Layer {
    int64_t in = 0, out = 0;
    const ParameterSlice* weight = nullptr;  // in parameter_layout()
    const ParameterSlice* bias = nullptr;
    Activation activation = Activation::kNone;
  };
  // Copies the batch to the device; throws std::logic_error beyond max_rows.
  int64_t load_batch(const Batch& batch);
  // The logits of each row.
  TypedPtr forward(int64_t rows);
  // The layer's activations, or its pre-activations where it has none.
  TypedPtr output_of(size_t layer);

  int64_t max_rows_;
  std::vector<Layer> layers_;
  Buffers buffers_;
  std::vector<Bf16> input_bf16_;  // a bf16 batch's host copy, reused
};
std::unique_ptr<Model> make_mlp(const ModelSpec& spec, const Device& device, const ModelOptions& options);
std::vector<ParameterSlice> mlp_parameter_tensors(const ModelSpec& spec);
ModelFootprint mlp_footprint(const ModelSpec& spec, const ModelOptions& options);

}  // namespace trainctl

// The MLP classifier: torch.nn.Sequential(Linear, Act, Linear, Act, ..., Linear) with softmax
// cross-entropy, on the device seam. Its layout names the slices as that Sequential's state_dict
// does ("0.weight" [out, in], "0.bias", "2.weight", ...); every tensor takes weight decay, as
// torch.optim does with one parameter group. Batches hold "x" float32 [rows, inputs] and "y"
// int32 [rows].
#pragma once

#include <memory>
#include <vector>

#include "model.h"
#include "registry.h"

namespace trainctl {

class Mlp : public Model {
 public:
  Mlp(const MlpSpec& spec, const Device& device, const ModelOptions& options);

  // PyTorch's default nn.Linear init: weight and bias uniform in +-1/sqrt(in_features).
  void init_parameters(uint64_t seed) override;
  BatchResult forward_backward(const Batch& batch, float grad_scale, const LayerDone& layer_done = {}) override;
  BatchResult evaluate(const Batch& batch) override;
  int64_t loss_terms_per_example() const override { return 1; }
  const char* term_unit() const override { return "samples"; }
  double training_flops_per_term() const override;

 private:
  struct Layer {
    int64_t in = 0, out = 0;
    int64_t weight_offset = 0, bias_offset = 0;
    Activation activation = Activation::kNone;
  };
  // Copies the batch to the device; throws std::logic_error beyond max_rows.
  int64_t load_batch(const Batch& batch);
  void forward(int64_t rows);

  decltype(BlasOps::gemm) matmul_;  // blas.gemm or blas.gemm_bf16
  int64_t max_rows_;
  std::vector<Layer> layers_;
  DeviceBuffer<float> input_;
  DeviceBuffer<int32_t> labels_;
  std::vector<DeviceBuffer<float>> pre_activations_, activations_;  // per layer, [max_rows, out]
  DeviceBuffer<float> grad_a_, grad_b_;                             // ping-pong, [max_rows, widest]
};

std::unique_ptr<Model> make_mlp(const ModelSpec& spec, const Device& device, const ModelOptions& options);
ModelFootprint mlp_footprint(const ModelSpec& spec, const ModelOptions& options);

}  // namespace trainctl

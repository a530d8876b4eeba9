// The MLP: torch.nn.Sequential(Linear, Act, Linear, Act, ..., Linear) with softmax
// cross-entropy, forward and backward on the device seam. All parameters live in one
// contiguous buffer (and the gradients in another of the same layout), so that one all-reduce
// and one optimizer call cover the whole model; parameter_layout() names the slices as
// PyTorch's state_dict does ("0.weight" [out, in], "0.bias", "2.weight", ...).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "train_spec.h"

namespace trainctl {

struct ParameterSlice {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t count = 0;
};

struct BatchResult {
  double loss_sum = 0.0;  // summed over rows, not averaged
  int64_t correct = 0;
};

class Mlp {
 public:
  // `max_rows`: the largest batch forward/backward will be called with. `precision` picks the
  // GEMM (DeviceOps::gemm or gemm_bf16); everything else is fp32 either way.
  Mlp(const ModelSpec& spec, const DeviceOps& ops, int64_t max_rows, Precision precision);

  // PyTorch's default nn.Linear init: weight and bias uniform in +-1/sqrt(in_features).
  void init_parameters(uint64_t seed);

  const std::vector<ParameterSlice>& parameter_layout() const { return layout_; }
  int64_t parameter_count() const { return parameters_.size(); }
  float* parameters() { return parameters_.get(); }
  float* gradients() { return gradients_.get(); }
  void zero_gradients();

  // Called during backward as each layer's gradients are complete: gradients()[offset, offset +
  // count) holds its weight and bias. Later layers come first.
  using LayerDone = std::function<void(int64_t offset, int64_t count)>;

  // One micro-batch (host x [rows, inputs], y [rows]): adds d(loss_sum * grad_scale)/dparams
  // into gradients(), telling `layer_done` (when set) about each layer as it finishes.
  BatchResult forward_backward(const float* x, const int32_t* y, int64_t rows, float grad_scale,
                               const LayerDone& layer_done = {});
  BatchResult evaluate(const float* x, const int32_t* y, int64_t rows);

 private:
  struct Layer {
    int64_t in = 0, out = 0;
    int64_t weight_offset = 0, bias_offset = 0;
    Activation activation = Activation::kNone;
  };
  // Copies a host batch to the device; throws std::logic_error beyond max_rows.
  void load_batch(const float* x, const int32_t* y, int64_t rows);
  void forward(int64_t rows);

  const DeviceOps& ops_;
  decltype(DeviceOps::gemm) matmul_;  // ops_.gemm or ops_.gemm_bf16
  int64_t max_rows_;
  std::vector<Layer> layers_;
  std::vector<ParameterSlice> layout_;
  DeviceBuffer<float> parameters_, gradients_;
  DeviceBuffer<float> input_;
  DeviceBuffer<int32_t> labels_;
  std::vector<DeviceBuffer<float>> pre_activations_, activations_;  // per layer, [max_rows, out]
  DeviceBuffer<float> grad_a_, grad_b_;                             // ping-pong, [max_rows, widest]
};

}  // namespace trainctl

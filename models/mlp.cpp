// The MLP: see model.h.
#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "rng.h"

namespace trainctl {

Mlp::Mlp(const ModelSpec& spec, const DeviceOps& ops, int64_t max_rows, Precision precision)
    : ops_(ops), matmul_(precision == Precision::kBf16 ? ops.gemm_bf16 : ops.gemm), max_rows_(max_rows) {
  std::vector<int64_t> widths{spec.inputs};
  widths.insert(widths.end(), spec.hidden.begin(), spec.hidden.end());
  widths.push_back(spec.classes);
  int64_t offset = 0;
  int64_t widest = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    Layer layer;
    layer.in = widths[i];
    layer.out = widths[i + 1];
    layer.activation = i + 2 < widths.size() ? spec.activation : Activation::kNone;
    // Sequential indexes each Linear at 2i because an activation module sits between them.
    const std::string prefix = std::to_string(2 * i);
    layer.weight_offset = offset;
    layout_.push_back({prefix + ".weight", {layer.out, layer.in}, offset, layer.out * layer.in});
    offset += layer.out * layer.in;
    layer.bias_offset = offset;
    layout_.push_back({prefix + ".bias", {layer.out}, offset, layer.out});
    offset += layer.out;
    widest = std::max({widest, layer.in, layer.out});
    layers_.push_back(layer);
  }
  parameters_ = DeviceBuffer<float>(ops_, offset);
  gradients_ = DeviceBuffer<float>(ops_, offset);
  input_ = DeviceBuffer<float>(ops_, max_rows * spec.inputs);
  labels_ = DeviceBuffer<int32_t>(ops_, max_rows);
  for (const Layer& layer : layers_) {
    pre_activations_.emplace_back(ops_, max_rows * layer.out);
    activations_.emplace_back(ops_, max_rows * layer.out);
  }
  grad_a_ = DeviceBuffer<float>(ops_, max_rows * widest);
  grad_b_ = DeviceBuffer<float>(ops_, max_rows * widest);
  zero_gradients();
}

void Mlp::init_parameters(uint64_t seed) {
  Rng rng(seed, kWeightInitStream);
  std::vector<float> host(static_cast<size_t>(parameter_count()));
  for (const Layer& layer : layers_) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(layer.in));
    for (int64_t i = 0; i < layer.out * layer.in; ++i) host[static_cast<size_t>(layer.weight_offset + i)] = rng.uniform(-bound, bound);
    for (int64_t i = 0; i < layer.out; ++i) host[static_cast<size_t>(layer.bias_offset + i)] = rng.uniform(-bound, bound);
  }
  parameters_.upload(host.data(), parameter_count());
}

void Mlp::zero_gradients() { ops_.fill_zero(gradients_.get(), gradients_.size()); }

void Mlp::forward(int64_t rows) {
  const float* input = input_.get();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    float* z = pre_activations_[i].get();
    // z[rows, out] = input[rows, in] * W^T, W stored [out, in] as in PyTorch.
    matmul_(false, true, rows, layer.out, layer.in, 1.0f, input, parameters_.get() + layer.weight_offset, 0.0f, z);
    ops_.bias_act_forward(z, parameters_.get() + layer.bias_offset, activations_[i].get(), rows, layer.out,
                          layer.activation);
    input = activations_[i].get();
  }
}

void Mlp::load_batch(const float* x, const int32_t* y, int64_t rows) {
  if (rows > max_rows_) throw std::logic_error(fmt::format("batch of {} rows exceeds {}", rows, max_rows_));
  input_.upload(x, rows * layers_.front().in);
  labels_.upload(y, rows);
}

BatchResult Mlp::forward_backward(const float* x, const int32_t* y, int64_t rows, float grad_scale,
                                  const LayerDone& layer_done) {
  load_batch(x, y, rows);
  forward(rows);

  BatchResult result;
  float* grad_output = grad_a_.get();
  float* grad_input = grad_b_.get();
  ops_.softmax_cross_entropy(activations_.back().get(), labels_.get(), grad_output, rows, layers_.back().out,
                             grad_scale, &result.loss_sum, &result.correct);
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& layer = layers_[i];
    // grad_output holds dL/d(activation); turn it into dL/dz in place (dL/dz = dL/da * act'(z)).
    ops_.bias_act_backward(grad_output, pre_activations_[i].get(), activations_[i].get(), grad_output,
                           gradients_.get() + layer.bias_offset, rows, layer.out, layer.activation);
    const float* layer_input = i == 0 ? input_.get() : activations_[i - 1].get();
    // dW[out, in] += dz^T[out, rows] * input[rows, in]
    matmul_(true, false, layer.out, layer.in, rows, 1.0f, grad_output, layer_input, 1.0f,
            gradients_.get() + layer.weight_offset);
    // The bias follows the weight in the buffer, so the layer is one slice.
    if (layer_done) layer_done(layer.weight_offset, layer.bias_offset + layer.out - layer.weight_offset);
    if (i == 0) break;
    // d(input)[rows, in] = dz[rows, out] * W[out, in]
    matmul_(false, false, rows, layer.in, layer.out, 1.0f, grad_output, parameters_.get() + layer.weight_offset, 0.0f,
            grad_input);
    std::swap(grad_output, grad_input);
  }
  return result;
}

BatchResult Mlp::evaluate(const float* x, const int32_t* y, int64_t rows) {
  load_batch(x, y, rows);
  forward(rows);
  BatchResult result;
  ops_.softmax_cross_entropy(activations_.back().get(), labels_.get(), nullptr, rows, layers_.back().out, 0.0f,
                             &result.loss_sum, &result.correct);
  return result;
}

}  // namespace trainctl

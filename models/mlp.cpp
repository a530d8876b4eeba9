// The MLP classifier: see mlp.h.
#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "rng.h"

namespace trainctl {

Mlp::Mlp(const MlpSpec& spec, const Device& device, const ModelOptions& options)
    : Model(device, options.stream),
      matmul_(options.precision == Precision::kBf16 ? device.blas.gemm_bf16 : device.blas.gemm),
      max_rows_(options.max_examples) {
  std::vector<int64_t> widths{spec.inputs};
  widths.insert(widths.end(), spec.hidden.begin(), spec.hidden.end());
  widths.push_back(spec.classes);
  std::vector<ParameterSlice> slices;
  int64_t offset = 0;
  int64_t widest = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    Layer layer;
    layer.in = widths[i];
    layer.out = widths[i + 1];
    layer.activation = i + 2 < widths.size() ? spec.activation : Activation::kNone;
    // Sequential indexes each Linear at 2i because an activation module sits between them.
    const std::string prefix = std::to_string(2 * i);
    slices.push_back({prefix + ".weight", {layer.out, layer.in}});
    slices.push_back({prefix + ".bias", {layer.out}});
    layer.weight_offset = offset;
    layer.bias_offset = offset + layer.out * layer.in;
    offset = layer.bias_offset + layer.out;
    widest = std::max({widest, layer.in, layer.out});
    layers_.push_back(layer);
  }
  set_layout(std::move(slices));
  input_ = DeviceBuffer<float>(device, max_rows_ * spec.inputs);
  labels_ = DeviceBuffer<int32_t>(device, max_rows_);
  for (const Layer& layer : layers_) {
    pre_activations_.emplace_back(device, max_rows_ * layer.out);
    activations_.emplace_back(device, max_rows_ * layer.out);
  }
  grad_a_ = DeviceBuffer<float>(device, max_rows_ * widest);
  grad_b_ = DeviceBuffer<float>(device, max_rows_ * widest);
}

void Mlp::init_parameters(uint64_t seed) {
  Rng rng(seed, kWeightInitStream);
  std::vector<float> host(static_cast<size_t>(parameter_count()));
  for (const Layer& layer : layers_) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(layer.in));
    for (int64_t i = 0; i < layer.out * layer.in; ++i) host[static_cast<size_t>(layer.weight_offset + i)] = rng.uniform(-bound, bound);
    for (int64_t i = 0; i < layer.out; ++i) host[static_cast<size_t>(layer.bias_offset + i)] = rng.uniform(-bound, bound);
  }
  upload_parameters(host);
}

double Mlp::training_flops_per_term() const {
  // Two FLOPs per weight and sample forward, four backward (input and weight gradients).
  double weights = 0.0;
  for (const Layer& layer : layers_) weights += static_cast<double>(layer.in * layer.out);
  return 6.0 * weights;
}

void Mlp::forward(int64_t rows) {
  const float* input = input_.get();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    float* z = pre_activations_[i].get();
    // z[rows, out] = input[rows, in] * W^T, W stored [out, in] as in PyTorch.
    matmul_(stream_, dense_gemm(false, true, rows, layer.out, layer.in, 1.0f, input, parameters() + layer.weight_offset,
                                0.0f, z));
    device_.elementwise.bias_act_forward(stream_, z, parameters() + layer.bias_offset, activations_[i].get(), rows,
                                         layer.out, layer.activation);
    input = activations_[i].get();
  }
}

int64_t Mlp::load_batch(const Batch& batch) {
  const int64_t rows = batch.examples;
  if (rows > max_rows_) throw std::logic_error(fmt::format("batch of {} rows exceeds {}", rows, max_rows_));
  input_.upload(batch.floats("x"), rows * layers_.front().in);
  labels_.upload(batch.ints("y"), rows);
  return rows;
}

BatchResult Mlp::forward_backward(const Batch& batch, float grad_scale, const LayerDone& layer_done) {
  const int64_t rows = load_batch(batch);
  forward(rows);

  BatchResult result;
  float* grad_output = grad_a_.get();
  float* grad_input = grad_b_.get();
  device_.loss.softmax_cross_entropy(stream_, activations_.back().get(), labels_.get(), grad_output, rows,
                                     layers_.back().out, grad_scale, &result.loss_sum, &result.correct);
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& layer = layers_[i];
    // grad_output holds dL/d(activation); turn it into dL/dz in place (dL/dz = dL/da * act'(z)).
    device_.elementwise.bias_act_backward(stream_, grad_output, pre_activations_[i].get(), activations_[i].get(),
                                          grad_output, gradients() + layer.bias_offset, rows, layer.out,
                                          layer.activation);
    const float* layer_input = i == 0 ? input_.get() : activations_[i - 1].get();
    // dW[out, in] += dz^T[out, rows] * input[rows, in]
    matmul_(stream_, dense_gemm(true, false, layer.out, layer.in, rows, 1.0f, grad_output, layer_input, 1.0f,
                                gradients() + layer.weight_offset));
    // The bias follows the weight in the buffer, so the layer is one slice.
    if (layer_done) layer_done(layer.weight_offset, layer.bias_offset + layer.out - layer.weight_offset);
    if (i == 0) break;
    // d(input)[rows, in] = dz[rows, out] * W[out, in]
    matmul_(stream_, dense_gemm(false, false, rows, layer.in, layer.out, 1.0f, grad_output,
                                parameters() + layer.weight_offset, 0.0f, grad_input));
    std::swap(grad_output, grad_input);
  }
  return result;
}

BatchResult Mlp::evaluate(const Batch& batch) {
  const int64_t rows = load_batch(batch);
  forward(rows);
  BatchResult result;
  device_.loss.softmax_cross_entropy(stream_, activations_.back().get(), labels_.get(), nullptr, rows,
                                     layers_.back().out, 0.0f, &result.loss_sum, &result.correct);
  return result;
}

std::unique_ptr<Model> make_mlp(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  return std::make_unique<Mlp>(std::get<MlpSpec>(spec.config), device, options);
}

}  // namespace trainctl

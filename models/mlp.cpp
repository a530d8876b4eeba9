// The MLP classifier: see mlp.h.
#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "rng.h"

namespace trainctl {

namespace {

// The widths of the activations: inputs, each hidden layer's, classes.
std::vector<int64_t> layer_widths(const MlpSpec& spec) {
  std::vector<int64_t> widths{spec.inputs};
  widths.insert(widths.end(), spec.hidden.begin(), spec.hidden.end());
  widths.push_back(spec.classes);
  return widths;
}

// The Linears' tensors as the Sequential's state_dict has them: "0.weight" [out, in], "0.bias",
// "2.weight", ... (an activation module sits between two Linears, so Linear i is at index 2i).
std::vector<ParameterSlice> linear_tensors(const std::vector<int64_t>& widths) {
  std::vector<ParameterSlice> tensors;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const std::string prefix = std::to_string(2 * i);
    tensors.push_back({prefix + ".weight", {widths[i + 1], widths[i]}});
    tensors.push_back({prefix + ".bias", {widths[i + 1]}});
  }
  return tensors;
}

// Two FLOPs per weight and sample forward, four backward (input and weight gradients).
double training_flops_per_sample(const std::vector<ParameterSlice>& tensors) {
  double weights = 0.0;
  for (const ParameterSlice& tensor : tensors)
    if (tensor.shape.size() == 2) weights += static_cast<double>(element_count(tensor.shape));
  return 6.0 * weights;
}

}  // namespace

Mlp::Mlp(const MlpSpec& spec, const Device& device, const ModelOptions& options)
    : Model(device, options.stream),
      matmul_(options.precision == Precision::kBf16 ? device.blas.gemm_bf16 : device.blas.gemm),
      max_rows_(options.max_examples) {
  const std::vector<int64_t> widths = layer_widths(spec);
  set_layout(linear_tensors(widths));
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    Layer layer;
    layer.in = widths[i];
    layer.out = widths[i + 1];
    layer.activation = i + 2 < widths.size() ? spec.activation : Activation::kNone;
    layer.weight_offset = parameter_layout()[2 * i].offset;
    layer.bias_offset = parameter_layout()[2 * i + 1].offset;
    layers_.push_back(layer);
  }
  const int64_t widest = *std::max_element(widths.begin(), widths.end());
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

double Mlp::training_flops_per_term() const { return training_flops_per_sample(parameter_layout()); }

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
                                     layers_.back().out, layers_.back().out, grad_scale, &result.loss_sum, &result.correct);
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
                                     layers_.back().out, layers_.back().out, 0.0f, &result.loss_sum, &result.correct);
  return result;
}

std::unique_ptr<Model> make_mlp(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  return std::make_unique<Mlp>(std::get<MlpSpec>(spec.config), device, options);
}

ModelFootprint mlp_footprint(const ModelSpec& model, const ModelOptions& options) {
  const auto& spec = std::get<MlpSpec>(model.config);
  const std::vector<int64_t> widths = layer_widths(spec);
  const std::vector<ParameterSlice> tensors = linear_tensors(widths);
  const int64_t rows = options.max_examples;
  const int64_t widest = *std::max_element(widths.begin(), widths.end());
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float)), kInt = static_cast<int64_t>(sizeof(int32_t));
  ModelFootprint footprint = parameter_footprint(tensors);
  // The constructor's buffers: input_ and labels_; each layer's pre-activations and
  // activations; grad_a_ and grad_b_.
  int64_t activation_floats = rows * spec.inputs + 2 * rows * widest;
  for (size_t i = 1; i < widths.size(); ++i) activation_floats += 2 * rows * widths[i];
  footprint.activation_bytes = activation_floats * kFloat + rows * kInt;
  if (options.precision == Precision::kBf16) {
    // gemm_bf16 rounds each operand into a buffer of its own. A is an activation or its
    // gradient, [rows, width]; B is a weight or, for a weight's gradient, a layer's input.
    const int64_t widest_input = *std::max_element(widths.begin(), widths.end() - 1);
    footprint.cpu_scratch_bytes = (rows * widest + std::max(footprint.largest_tensor, rows * widest_input)) * kFloat;
  }
  footprint.host_batch_bytes = rows * (spec.inputs * kFloat + kInt);
  footprint.training_flops_per_term = training_flops_per_sample(tensors);
  return footprint;
}

}  // namespace trainctl

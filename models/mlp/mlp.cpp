// The MLP classifier: see mlp.h.
#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "rng.h"

namespace trainctl {

namespace {

// The Linears' tensors as the Sequential's state_dict has them: "0.weight" [out, in], "0.bias",
// "2.weight", ... (an activation module sits between two Linears, so Linear i is at index 2i).
// Each Linear is a layer.
std::vector<ParameterSlice> linear_tensors(const std::vector<int64_t>& widths) {
  std::vector<ParameterSlice> tensors;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const std::string prefix = std::to_string(2 * i);
    tensors.push_back({prefix + ".weight", {widths[i + 1], widths[i]}});
    tensors.push_back({prefix + ".bias", {widths[i + 1]}});
    tensors.end()[-2].layer = tensors.end()[-1].layer = static_cast<int>(i);
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

Mlp::Buffers Mlp::plan_buffers(const MlpSpec& spec, const ModelOptions& options, BufferPlan& plan) {
  const std::vector<int64_t> widths = spec.widths();
  const int64_t rows = options.max_examples;
  Buffers buffers;
  buffers.input = plan.activations(rows * spec.inputs);
  buffers.labels = plan.buffer<int32_t>(rows);
  for (size_t i = 1; i < widths.size(); ++i) {
    buffers.pre_activations.push_back(plan.activations(rows * widths[i]));
    buffers.activations.push_back(i + 1 < widths.size() ? plan.activations(rows * widths[i]) : TypedBuffer());
  }
  const int64_t widest = *std::max_element(widths.begin(), widths.end());
  buffers.grad_a = plan.activations(rows * widest);
  buffers.grad_b = plan.activations(rows * widest);
  return buffers;
}

Mlp::Mlp(const MlpSpec& spec, const Device& device, const ModelOptions& options)
    : Model(device, options), max_rows_(options.max_examples) {
  const std::vector<int64_t> widths = spec.widths();
  set_layout(linear_tensors(widths));
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    Layer layer;
    layer.in = widths[i];
    layer.out = widths[i + 1];
    layer.activation = i + 2 < widths.size() ? spec.activation : Activation::kNone;
    layer.weight = &parameter_layout()[2 * i];
    layer.bias = &parameter_layout()[2 * i + 1];
    layers_.push_back(layer);
  }
  BufferPlan plan(&device, activation_type());
  buffers_ = plan_buffers(spec, options, plan);
}

void Mlp::init_parameters(uint64_t seed) {
  Rng rng(seed, kWeightInitStream);
  std::vector<float> host(static_cast<size_t>(parameter_count()));
  for (const Layer& layer : layers_) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(layer.in));
    for (int64_t i = 0; i < layer.out * layer.in; ++i) host[static_cast<size_t>(layer.weight->offset + i)] = rng.uniform(-bound, bound);
    for (int64_t i = 0; i < layer.out; ++i) host[static_cast<size_t>(layer.bias->offset + i)] = rng.uniform(-bound, bound);
  }
  upload_parameters(host);
}

double Mlp::training_flops_per_term() const { return training_flops_per_sample(parameter_layout()); }

TypedPtr Mlp::output_of(size_t layer) {
  return layers_[layer].activation == Activation::kNone ? buffers_.pre_activations[layer].get()
                                                        : buffers_.activations[layer].get();
}

TypedPtr Mlp::forward(int64_t rows) {
  ConstTypedPtr input = buffers_.input.get();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    const TypedPtr z = buffers_.pre_activations[i].get();
    enter_layer(static_cast<int>(i), Pass::kForward);
    // z[rows, out] = input[rows, in] W^T + b, W stored [out, in] as in PyTorch.
    Gemm gemm = dense_gemm(false, true, rows, layer.out, layer.in, 1.0f, input, compute_weights_of(*layer.weight), 0.0f, z);
    gemm.epilogue = Epilogue::kBias;
    gemm.bias = compute_weights_of(*layer.bias);
    device_.blas.gemm(stream_, gemm);
    if (layer.activation != Activation::kNone)
      device_.elementwise.activation_forward(stream_, buffers_.activations[i].get(), z, rows * layer.out,
                                             layer.activation);
    input = output_of(i);
  }
  return output_of(layers_.size() - 1);
}

int64_t Mlp::load_batch(const Batch& batch) {
  const int64_t rows = batch.examples;
  if (rows > max_rows_) throw std::logic_error(fmt::format("batch of {} rows exceeds {}", rows, max_rows_));
  const int64_t values = rows * layers_.front().in;
  const TypedPtr input = buffers_.input.get();
  if (input.type == ElementType::kBf16) {
    // Rounded here, so that the device's copy is a bf16 one from the start.
    input_bf16_.resize(static_cast<size_t>(values));
    const float* x = batch.floats("x");
    for (int64_t i = 0; i < values; ++i) input_bf16_[static_cast<size_t>(i)] = to_bf16(x[i]);
    device_.memory.upload(stream_, input.data, input_bf16_.data(), static_cast<size_t>(values) * sizeof(Bf16));
  } else {
    device_.memory.upload(stream_, input.data, batch.floats("x"), static_cast<size_t>(values) * sizeof(float));
  }
  device_.memory.upload(stream_, buffers_.labels.get(), batch.ints("y"), static_cast<size_t>(rows) * sizeof(int32_t));
  return rows;
}

void Mlp::forward_backward_into(const Batch& batch, float grad_scale, BatchResult* totals,
                                const LayerDone& layer_done) {
  const int64_t rows = load_batch(batch);
  // The loss writes the logits' gradient over them: that is where the backward pass starts.
  TypedPtr grad_output = forward(rows);
  device_.loss.softmax_cross_entropy(stream_, grad_output, buffers_.labels.get(), rows, layers_.back().out,
                                     layers_.back().out, grad_scale, &totals->loss_sum, &totals->correct);
  TypedPtr grad_input = buffers_.grad_a.get(), spare = buffers_.grad_b.get();
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& layer = layers_[i];
    enter_layer(static_cast<int>(i), Pass::kBackward);
    // grad_output holds dL/d(activation); turn it into dL/dz in place (dL/dz = dL/da * act'(z)).
    if (layer.activation != Activation::kNone)
      device_.elementwise.activation_backward(stream_, grad_output, grad_output, buffers_.pre_activations[i].get(),
                                              buffers_.activations[i].get(), rows * layer.out, layer.activation);
    const ConstTypedPtr layer_input = i == 0 ? ConstTypedPtr(buffers_.input.get()) : ConstTypedPtr(output_of(i - 1));
    // dW[out, in] += dz^T[out, rows] input[rows, in], and db[out] += the column sums of dz.
    Gemm weight_gradient = dense_gemm(true, false, layer.out, layer.in, rows, 1.0f, grad_output, layer_input, 1.0f,
                                      gradient_of(*layer.weight));
    weight_gradient.epilogue = Epilogue::kBiasGradA;
    weight_gradient.bias_grad = gradient_of(*layer.bias);
    device_.blas.gemm(stream_, weight_gradient);
    layer_gradients_done(static_cast<int>(i), layer_done);
    if (i == 0) break;
    // d(input)[rows, in] = dz[rows, out] W[out, in]
    device_.blas.gemm(stream_, dense_gemm(false, false, rows, layer.in, layer.out, 1.0f, grad_output,
                                          compute_weights_of(*layer.weight), 0.0f, grad_input));
    grad_output = grad_input;
    std::swap(grad_input, spare);
  }
}

void Mlp::evaluate_into(const Batch& batch, BatchResult* totals) {
  const int64_t rows = load_batch(batch);
  device_.loss.softmax_cross_entropy(stream_, forward(rows), buffers_.labels.get(), rows, layers_.back().out,
                                     layers_.back().out, std::nullopt, &totals->loss_sum, &totals->correct);
}

std::unique_ptr<Model> make_mlp(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  return std::make_unique<Mlp>(spec.as<MlpSpec>(), device, options);
}

std::vector<ParameterSlice> mlp_parameter_tensors(const ModelSpec& spec) {
  return linear_tensors(spec.as<MlpSpec>().widths());
}

ModelFootprint mlp_footprint(const ModelSpec& model, const ModelOptions& options) {
  const auto& spec = model.as<MlpSpec>();
  const std::vector<int64_t> widths = spec.widths();
  const std::vector<ParameterSlice> tensors = linear_tensors(widths);
  const int64_t rows = options.max_examples;
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float)), kInt = static_cast<int64_t>(sizeof(int32_t));
  ModelFootprint footprint = parameter_footprint(tensors, options.precision);
  BufferPlan plan(nullptr, footprint.activation_type);
  Mlp::plan_buffers(spec, options, plan);
  footprint.activation_bytes += plan.bytes();
  if (options.precision == Precision::kBf16) {
    // The bf16 GEMMs widen A and B into float scratch of their own and form a bf16 C in float. A
    // is an activation or its gradient, [rows, width]; B is a weight or, for a weight's gradient,
    // a layer's input; C an activation, or a weight's gradient in place.
    const int64_t widest = *std::max_element(widths.begin(), widths.end());
    const int64_t widest_input = *std::max_element(widths.begin(), widths.end() - 1);
    footprint.cpu_scratch_bytes =
        (2 * rows * widest + std::max(footprint.largest_tensor, rows * widest_input)) * kFloat;
  }
  footprint.host_batch_bytes = rows * (spec.inputs * kFloat + kInt);
  footprint.training_flops_per_term = training_flops_per_sample(tensors);
  return footprint;
}

}  // namespace trainctl

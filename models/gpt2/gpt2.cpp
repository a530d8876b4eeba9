// GPT-2 on the device seam: see gpt2.h.
#include "gpt2.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "language_model.h"
#include "rng.h"

namespace trainctl {

namespace {

constexpr float kLayerNormEps = 1e-5f;
constexpr double kInitStd = 0.02;

// Names of a block's tensors after "transformer.h.<i>.", in BlockTensor order.
constexpr const char* kBlockTensorNames[] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

// Layout indices: wte and wpe, then the blocks, then ln_f.
constexpr size_t kWte = 0, kWpe = 1, kFirstBlock = 2;

// llm.c's padding of the vocabulary: GEMMs over 50304 rows run at full tile width where 50257
// would leave a ragged last tile.
constexpr int64_t kVocabRowMultiple = 128;

// GPT2LMHeadModel's tensors in state_dict order (Conv1D weights [in, out]), without lm_head. The
// layers: the embeddings, kept (wte is the head too), each block, then ln_f.
std::vector<ParameterSlice> gpt2_tensors(const Gpt2Spec& spec) {
  const int64_t channels = spec.n_embd;
  const std::vector<int64_t> block_shapes[] = {
      {channels}, {channels}, {channels, 3 * channels}, {3 * channels}, {channels, channels}, {channels},
      {channels}, {channels}, {channels, 4 * channels}, {4 * channels}, {4 * channels, channels}, {channels}};
  // GPT-2 practice: weight decay on the matrices (embeddings included), not on biases or LayerNorm.
  std::vector<ParameterSlice> tensors;
  auto add = [&tensors](std::string name, std::vector<int64_t> shape) {
    const bool decay = shape.size() == 2;
    tensors.push_back({std::move(name), std::move(shape), 0, 0, decay});
  };
  add("transformer.wte.weight", {spec.vocab_size, channels});
  tensors.back().padding = (gpt2_padded_vocab(spec) - spec.vocab_size) * channels;
  add("transformer.wpe.weight", {spec.block_size, channels});
  for (ParameterSlice& embedding : tensors) embedding.layer = kKeptLayer;
  for (int64_t block = 0; block < spec.n_layer; ++block)
    for (size_t tensor = 0; tensor < std::size(block_shapes); ++tensor) {
      add(fmt::format("transformer.h.{}.{}", block, kBlockTensorNames[tensor]), block_shapes[tensor]);
      tensors.back().layer = static_cast<int>(block);
    }
  add("transformer.ln_f.weight", {channels});
  add("transformer.ln_f.bias", {channels});
  tensors.end()[-2].layer = tensors.end()[-1].layer = static_cast<int>(spec.n_layer);
  return tensors;
}

// nanoGPT's estimate: 6 N + 12 n_layer n_embd block_size, N the parameters without wpe.
double training_flops_per_token(const Gpt2Spec& spec, int64_t parameters) {
  const double non_embedding = static_cast<double>(parameters - spec.block_size * spec.n_embd);
  return 6.0 * non_embedding + 12.0 * static_cast<double>(spec.n_layer) * static_cast<double>(spec.n_embd) *
                                   static_cast<double>(spec.block_size);
}

}  // namespace

// What a block's backward reads, from its forward.
struct Gpt2BlockActivations {
  TypedBuffer ln1;
  DeviceBuffer<float> ln1_mean, ln1_rstd;
  TypedBuffer qkv, attention;
  DeviceBuffer<float> lse;
  DeviceBuffer<float> residual;  // the stream after the attention's residual add
  TypedBuffer ln2;
  DeviceBuffer<float> ln2_mean, ln2_rstd;
  TypedBuffer fc, gelu;  // c_fc's pre-activation (the GELU epilogue's aux) and its GELU
};

struct Gpt2::Buffers {
  DeviceBuffer<int32_t> tokens, targets;
  std::vector<DeviceBuffer<float>> residuals;  // [n_layer + 1]: each block's input, then ln_f's
  std::vector<Gpt2BlockActivations> blocks;    // one per block, or the shared scratch
  // An attention's or an MLP's output, until the LayerNorm after it adds it to the residual stream.
  TypedBuffer branch;
  TypedBuffer ln_f;
  DeviceBuffer<float> ln_f_mean, ln_f_rstd;
  TypedBuffer logits;  // then, in training, their gradient
  // Backward: dL/d(the residual stream) in fp32, and in bf16 its copy for the GEMMs that read it;
  // dL/d(a LayerNorm's output, or the attention's), and dL/d(qkv or c_fc's output), the widest.
  DeviceBuffer<float> grad_residual;
  TypedBuffer grad_residual_copy;
  TypedBuffer grad_normed, grad_wide;

  Gpt2BlockActivations& of(int64_t block, bool recompute) { return blocks[recompute ? 0 : block]; }
};

namespace {

Gpt2BlockActivations block_activations(BufferPlan& plan, int64_t rows, const Gpt2Spec& spec) {
  const int64_t channels = spec.n_embd;
  Gpt2BlockActivations block;
  block.ln1 = plan.activations(rows * channels);
  block.ln1_mean = plan.buffer<float>(rows);
  block.ln1_rstd = plan.buffer<float>(rows);
  block.qkv = plan.activations(rows * 3 * channels);
  block.attention = plan.activations(rows * channels);
  block.lse = plan.buffer<float>(rows * spec.n_head);
  block.residual = plan.buffer<float>(rows * channels);
  block.ln2 = plan.activations(rows * channels);
  block.ln2_mean = plan.buffer<float>(rows);
  block.ln2_rstd = plan.buffer<float>(rows);
  block.fc = plan.activations(rows * 4 * channels);
  block.gelu = plan.activations(rows * 4 * channels);
  return block;
}

}  // namespace

Gpt2::Buffers Gpt2::plan_buffers(const Gpt2Spec& spec, const ModelOptions& options, BufferPlan& plan) {
  const int64_t rows = options.max_examples * spec.block_size, channels = spec.n_embd;
  Buffers buffers;
  buffers.tokens = plan.buffer<int32_t>(rows);
  buffers.targets = plan.buffer<int32_t>(rows);
  for (int64_t block = 0; block <= spec.n_layer; ++block)
    buffers.residuals.push_back(plan.buffer<float>(rows * channels));
  for (int64_t block = 0; block < (options.recompute ? 1 : spec.n_layer); ++block)
    buffers.blocks.push_back(block_activations(plan, rows, spec));
  buffers.branch = plan.activations(rows * channels);
  buffers.ln_f = plan.activations(rows * channels);
  buffers.ln_f_mean = plan.buffer<float>(rows);
  buffers.ln_f_rstd = plan.buffer<float>(rows);
  buffers.logits = plan.activations(rows * gpt2_padded_vocab(spec));
  buffers.grad_residual = plan.buffer<float>(rows * channels);
  if (plan.activation_type() != ElementType::kF32) buffers.grad_residual_copy = plan.activations(rows * channels);
  buffers.grad_normed = plan.activations(rows * channels);
  buffers.grad_wide = plan.activations(rows * 4 * channels);
  return buffers;
}

int64_t gpt2_padded_vocab(const Gpt2Spec& spec) {
  return (spec.vocab_size + kVocabRowMultiple - 1) / kVocabRowMultiple * kVocabRowMultiple;
}

Gpt2::Gpt2(const Gpt2Spec& spec, const Device& device, const ModelOptions& options)
    : LanguageModel(device, options),
      spec_(spec),
      options_(options),
      norm_(device.norm.value()),
      embedding_(device.embedding.value()),
      attention_(device.attention.value()) {
  set_layout(gpt2_tensors(spec));
  BufferPlan plan(&device, activation_type());
  buffers_ = std::make_unique<Buffers>(plan_buffers(spec, options, plan));
}

Gpt2::~Gpt2() = default;

const ParameterSlice& Gpt2::slice(int64_t block, BlockTensor tensor) const {
  return parameter_layout()[kFirstBlock + static_cast<size_t>(block * kBlockTensors + tensor)];
}

void Gpt2::init_parameters(uint64_t seed) {
  Rng rng(seed, kWeightInitStream);
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(spec_.n_layer));
  std::vector<float> host(static_cast<size_t>(parameter_count()));
  for (const ParameterSlice& slice : parameter_layout()) {
    float* values = host.data() + slice.offset;
    if (slice.shape.size() == 1) {
      const bool layernorm_weight = slice.name.ends_with(".weight");  // the only 1-D weights
      for (int64_t i = 0; i < slice.count; ++i) values[i] = layernorm_weight ? 1.0f : 0.0f;
      continue;
    }
    const double std = slice.name.ends_with("c_proj.weight") ? residual_std : kInitStd;
    for (int64_t i = 0; i < slice.count; ++i) values[i] = static_cast<float>(std * rng.normal());
  }
  upload_parameters(host);
}

double Gpt2::training_flops_per_term() const { return training_flops_per_token(spec_, parameter_count()); }

Gemm Gpt2::matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, ConstTypedPtr a,
                  ConstTypedPtr b, bool accumulate, TypedPtr c) const {
  return dense_gemm(transpose_a, transpose_b, m, n, k, 1.0f, a, b, accumulate ? 1.0f : 0.0f, c);
}

Gpt2::Shape Gpt2::load_batch(const Batch& batch) {
  const int64_t examples =
      upload_token_batch(device_, stream_, batch, {spec_.block_size, spec_.vocab_size, options_.max_examples},
                         buffers_->tokens.get(), buffers_->targets.get());
  return {examples, spec_.block_size};
}

void Gpt2::forward(Shape shape) {
  Buffers& buffers = *buffers_;
  const std::vector<ParameterSlice>& layout = parameter_layout();
  enter_layer(kKeptLayer, Pass::kForward);
  embedding_.embedding_forward(stream_, buffers.residuals[0].get(), buffers.tokens.get(), weights_of(layout[kWte]),
                               weights_of(layout[kWpe]), shape.batch, shape.seq, spec_.n_embd);
  for (int64_t block = 0; block < spec_.n_layer; ++block) {
    enter_layer(static_cast<int>(block), Pass::kForward);
    block_forward(block, shape, true);
  }
  // ln_f, with the last MLP's residual add.
  enter_layer(ln_f_layer(), Pass::kForward);
  norm_.layernorm_forward(stream_, buffers.ln_f.get(), buffers.ln_f_mean.get(), buffers.ln_f_rstd.get(),
                          buffers.of(spec_.n_layer - 1, options_.recompute).residual.get(), buffers.branch.get(),
                          buffers.residuals.back().get(), weights_of(layout.end()[-2]), weights_of(layout.end()[-1]),
                          shape.rows(), spec_.n_embd, kLayerNormEps);
}

void Gpt2::block_forward(int64_t block, Shape shape, bool write_output) {
  Buffers& buffers = *buffers_;
  const int64_t rows = shape.rows(), channels = spec_.n_embd;
  Gpt2BlockActivations& a = buffers.of(block, options_.recompute);
  float* input = buffers.residuals[static_cast<size_t>(block)].get();

  // ln_1. In the forward pass the block's input is the previous block's residual stream plus its
  // MLP's output, added here; recompute finds the input saved.
  if (block > 0 && write_output) {
    norm_.layernorm_forward(stream_, a.ln1.get(), a.ln1_mean.get(), a.ln1_rstd.get(),
                            buffers.of(block - 1, options_.recompute).residual.get(), buffers.branch.get(), input,
                            parameter(block, kLn1Weight), parameter(block, kLn1Bias), rows, channels, kLayerNormEps);
  } else {
    norm_.layernorm_forward(stream_, a.ln1.get(), a.ln1_mean.get(), a.ln1_rstd.get(), input, {}, nullptr,
                            parameter(block, kLn1Weight), parameter(block, kLn1Bias), rows, channels, kLayerNormEps);
  }
  Gemm qkv = matmul(false, false, rows, 3 * channels, channels, a.ln1.get(), compute(block, kAttnWeight), false,
                    a.qkv.get());
  qkv.epilogue = Epilogue::kBias;
  qkv.bias = compute(block, kAttnBias);
  run(qkv);
  attention_.attention_forward(stream_, a.attention.get(), a.lse.get(), a.qkv.get(), attention_shape(shape));
  Gemm projection = matmul(false, false, rows, channels, channels, a.attention.get(),
                           compute(block, kAttnProjWeight), false, buffers.branch.get());
  projection.epilogue = Epilogue::kBias;
  projection.bias = compute(block, kAttnProjBias);
  run(projection);

  // ln_2, with the attention's residual add.
  norm_.layernorm_forward(stream_, a.ln2.get(), a.ln2_mean.get(), a.ln2_rstd.get(), input, buffers.branch.get(),
                          a.residual.get(), parameter(block, kLn2Weight), parameter(block, kLn2Bias), rows, channels,
                          kLayerNormEps);
  Gemm fc = matmul(false, false, rows, 4 * channels, channels, a.ln2.get(), compute(block, kFcWeight), false,
                   a.gelu.get());
  fc.epilogue = Epilogue::kGeluBias;
  fc.bias = compute(block, kFcBias);
  fc.aux = a.fc.get();
  fc.ld_aux = 4 * channels;
  run(fc);
  if (!write_output) return;
  Gemm fc_projection = matmul(false, false, rows, channels, 4 * channels, a.gelu.get(), compute(block, kFcProjWeight),
                              false, buffers.branch.get());
  fc_projection.epilogue = Epilogue::kBias;
  fc_projection.bias = compute(block, kFcProjBias);
  run(fc_projection);
}

void Gpt2::block_backward(int64_t block, Shape shape) {
  Buffers& buffers = *buffers_;
  const int64_t rows = shape.rows(), channels = spec_.n_embd;
  Gpt2BlockActivations& a = buffers.of(block, options_.recompute);
  // dL/d(the residual stream): the residual adds pass it through unchanged, and each LayerNorm's
  // backward adds its branch's contribution (and copies the sum for the GEMMs in bf16).
  float* grad = buffers.grad_residual.get();
  const TypedPtr grad_copy = buffers.grad_residual_copy.get();
  const ConstTypedPtr grad_read = grad_copy ? ConstTypedPtr(grad_copy) : ConstTypedPtr(grad);
  const TypedPtr grad_normed = buffers.grad_normed.get();
  const TypedPtr grad_wide = buffers.grad_wide.get();
  // The weight's gradient, and the bias's from the same GEMM's B operand (the output gradient).
  const auto weight_gradient = [&](int64_t m, int64_t n, ConstTypedPtr input, ConstTypedPtr output_gradient,
                                   BlockTensor weight, BlockTensor bias) {
    Gemm gemm = matmul(true, false, m, n, rows, input, output_gradient, true, gradient(block, weight));
    gemm.epilogue = Epilogue::kBiasGradB;
    gemm.bias_grad = gradient(block, bias);
    run(gemm);
  };

  // MLP: output = residual + gelu(ln2 W_fc + b_fc) W_proj + b_proj.
  weight_gradient(4 * channels, channels, a.gelu.get(), grad_read, kFcProjWeight, kFcProjBias);
  Gemm gelu_gradient =
      matmul(false, true, rows, 4 * channels, channels, grad_read, compute(block, kFcProjWeight), false, grad_wide);
  gelu_gradient.epilogue = Epilogue::kGeluGrad;
  gelu_gradient.aux = a.fc.get();
  gelu_gradient.ld_aux = 4 * channels;
  run(gelu_gradient);
  weight_gradient(channels, 4 * channels, a.ln2.get(), grad_wide, kFcWeight, kFcBias);
  run(matmul(false, true, rows, channels, 4 * channels, grad_wide, compute(block, kFcWeight), false, grad_normed));
  norm_.layernorm_backward(stream_, grad, grad_copy, gradient(block, kLn2Weight), gradient(block, kLn2Bias),
                           grad_normed, a.residual.get(), parameter(block, kLn2Weight), a.ln2_mean.get(),
                           a.ln2_rstd.get(), rows, channels);

  // Attention: residual = input + attention(ln1 W_attn + b_attn) W_proj + b_proj.
  weight_gradient(channels, channels, a.attention.get(), grad_read, kAttnProjWeight, kAttnProjBias);
  run(matmul(false, true, rows, channels, channels, grad_read, compute(block, kAttnProjWeight), false, grad_normed));
  attention_.attention_backward(stream_, grad_wide, grad_normed, a.qkv.get(), a.attention.get(), a.lse.get(),
                                attention_shape(shape));
  weight_gradient(channels, 3 * channels, a.ln1.get(), grad_wide, kAttnWeight, kAttnBias);
  run(matmul(false, true, rows, channels, 3 * channels, grad_wide, compute(block, kAttnWeight), false, grad_normed));
  norm_.layernorm_backward(stream_, grad, grad_copy, gradient(block, kLn1Weight), gradient(block, kLn1Bias),
                           grad_normed, buffers.residuals[static_cast<size_t>(block)].get(),
                           parameter(block, kLn1Weight), a.ln1_mean.get(), a.ln1_rstd.get(), rows, channels);
}

void Gpt2::lm_head_and_loss(Shape shape, std::optional<float> grad_scale, BatchResult* totals) {
  Buffers& buffers = *buffers_;
  // Over the padded vocabulary: its zero rows give logits the loss skips.
  const int64_t padded_vocab = gpt2_padded_vocab(spec_);
  run(matmul(false, true, shape.rows(), padded_vocab, spec_.n_embd, buffers.ln_f.get(),
             compute_weights_of(parameter_layout()[kWte]), false, buffers.logits.get()));
  device_.loss.softmax_cross_entropy(stream_, buffers.logits.get(), buffers.targets.get(), shape.rows(),
                                     spec_.vocab_size, padded_vocab, grad_scale, &totals->loss_sum, &totals->correct);
}

void Gpt2::forward_backward_into(const Batch& batch, float grad_scale, BatchResult* totals,
                                 const LayerDone& layer_done) {
  Buffers& buffers = *buffers_;
  const Shape shape = load_batch(batch);
  forward(shape);
  lm_head_and_loss(shape, grad_scale, totals);

  const std::vector<ParameterSlice>& layout = parameter_layout();
  const int64_t rows = shape.rows(), channels = spec_.n_embd, vocab = gpt2_padded_vocab(spec_);
  // The tied head: logits = ln_f wte^T, so wte's gradient gets ln_f^T-weighted logit gradients
  // here and the embedding's below. Over the padded rows too, whose logit gradients are 0: their
  // gradient stays exactly 0.
  const ParameterSlice& wte = layout[kWte];
  const TypedPtr grad_logits = buffers.logits.get();
  run(matmul(true, false, vocab, channels, rows, grad_logits, buffers.ln_f.get(), true, gradient_of(wte)));
  run(matmul(false, false, rows, channels, vocab, grad_logits, compute_weights_of(wte), false,
             buffers.grad_normed.get()));
  const ParameterSlice& ln_f_weight = layout.end()[-2];
  const ParameterSlice& ln_f_bias = layout.end()[-1];
  enter_layer(ln_f_layer(), Pass::kBackward);
  device_.memory.fill_zero(stream_, buffers.grad_residual.get(), static_cast<size_t>(rows * channels) * sizeof(float));
  norm_.layernorm_backward(stream_, buffers.grad_residual.get(), buffers.grad_residual_copy.get(),
                           gradient_of(ln_f_weight), gradient_of(ln_f_bias), buffers.grad_normed.get(),
                           buffers.residuals.back().get(), weights_of(ln_f_weight), buffers.ln_f_mean.get(),
                           buffers.ln_f_rstd.get(), rows, channels);
  layer_gradients_done(ln_f_layer(), layer_done);

  for (int64_t block = spec_.n_layer - 1; block >= 0; --block) {
    enter_layer(static_cast<int>(block), Pass::kBackward);
    // The shared scratch still holds the last block's activations from the forward pass.
    if (options_.recompute && block != spec_.n_layer - 1) block_forward(block, shape, false);
    block_backward(block, shape);
    layer_gradients_done(static_cast<int>(block), layer_done);
  }

  embedding_.embedding_backward(stream_, gradient_of(wte), gradient_of(layout[kWpe]), buffers.grad_residual.get(),
                                buffers.tokens.get(), shape.batch, shape.seq, channels);
  layer_gradients_done(kKeptLayer, layer_done);
}

void Gpt2::evaluate_into(const Batch& batch, BatchResult* totals) {
  const Shape shape = load_batch(batch);
  forward(shape);
  lm_head_and_loss(shape, std::nullopt, totals);
}

void Gpt2::next_token_logits(const int32_t* tokens, int64_t length, float* logits) {
  if (length < 1 || length > spec_.block_size)
    throw std::logic_error(fmt::format("{} tokens of context, outside [1, {}]", length, spec_.block_size));
  Buffers& buffers = *buffers_;
  device_.memory.upload(stream_, buffers.tokens.get(), tokens, static_cast<size_t>(length) * sizeof(int32_t));
  forward({1, length});
  // Only the last position's logits are wanted: a [1, C] x [C, V] product.
  const TypedPtr last = buffers.ln_f.get() + (length - 1) * spec_.n_embd;
  run(matmul(false, true, 1, gpt2_padded_vocab(spec_), spec_.n_embd, last, compute_weights_of(parameter_layout()[kWte]),
             false, buffers.logits.get()));
  download_logits(device_, stream_, buffers.logits.get(), spec_.vocab_size, logits);
}

std::unique_ptr<Model> make_gpt2(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  return std::make_unique<Gpt2>(spec.as<Gpt2Spec>(), device, options);
}

std::vector<ParameterSlice> gpt2_parameter_tensors(const ModelSpec& spec) {
  return gpt2_tensors(spec.as<Gpt2Spec>());
}

ModelFootprint gpt2_footprint(const ModelSpec& model, const ModelOptions& options) {
  const auto& spec = model.as<Gpt2Spec>();
  ModelFootprint footprint = language_model_footprint(
      gpt2_tensors(spec), options, spec.block_size, [&](BufferPlan& plan) { Gpt2::plan_buffers(spec, options, plan); });
  if (options.precision == Precision::kBf16) {
    // The bf16 ops widen their operands into float scratch of their own, and form a bf16 result
    // in float first. The widest GEMM A are the logits' gradient [rows, vocab] and the MLP's
    // [rows, 4C]; the widest B are wte [vocab, C], c_fc's weights [C, 4C] and, for c_proj's
    // weight gradient, the MLP's [rows, 4C]; the widest C is the logits [rows, vocab].
    const int64_t rows = options.max_examples * spec.block_size, channels = spec.n_embd;
    const int64_t vocab = gpt2_padded_vocab(spec);
    const int64_t widest_a = rows * std::max(vocab, 4 * channels);
    const int64_t widest_b = std::max({vocab * channels, 4 * channels * channels, rows * 4 * channels});
    footprint.cpu_scratch_bytes += (widest_a + widest_b + rows * vocab) * static_cast<int64_t>(sizeof(float));
  }
  footprint.training_flops_per_term = training_flops_per_token(spec, footprint.parameters);
  return footprint;
}

}  // namespace trainctl

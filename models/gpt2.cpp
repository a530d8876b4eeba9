// GPT-2 on the device seam: see gpt2.h.
#include "gpt2.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

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

// GPT2LMHeadModel's tensors in state_dict order (Conv1D weights [in, out]), without lm_head.
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
  for (int64_t block = 0; block < spec.n_layer; ++block)
    for (size_t tensor = 0; tensor < std::size(block_shapes); ++tensor)
      add(fmt::format("transformer.h.{}.{}", block, kBlockTensorNames[tensor]), block_shapes[tensor]);
  add("transformer.ln_f.weight", {channels});
  add("transformer.ln_f.bias", {channels});
  return tensors;
}

// nanoGPT's estimate: 6 N + 12 n_layer n_embd block_size, N the parameters without wpe.
double training_flops_per_token(const Gpt2Spec& spec, int64_t parameters) {
  const double non_embedding = static_cast<double>(parameters - spec.block_size * spec.n_embd);
  return 6.0 * non_embedding + 12.0 * static_cast<double>(spec.n_layer) * static_cast<double>(spec.n_embd) *
                                   static_cast<double>(spec.block_size);
}

// The floats of one block's activations (Gpt2::BlockActivations) for `rows` token positions.
int64_t block_activation_floats(const Gpt2Spec& spec, int64_t rows) {
  const int64_t channels = spec.n_embd;
  // ln1, qkv (3C), attention, residual, ln2, fc (4C) and gelu (4C); the two LayerNorms' mean and
  // rstd; the attention's log-sum-exp per head.
  return rows * (15 * channels + 4 + spec.n_head);
}

}  // namespace

int64_t gpt2_padded_vocab(const Gpt2Spec& spec) {
  return (spec.vocab_size + kVocabRowMultiple - 1) / kVocabRowMultiple * kVocabRowMultiple;
}

Gpt2::Gpt2(const Gpt2Spec& spec, const Device& device, const ModelOptions& options)
    : LanguageModel(device, options.stream),
      spec_(spec),
      options_(options),
      norm_(device.norm.value()),
      embedding_(device.embedding.value()),
      attention_(device.attention.value()),
      gemm_(options.precision == Precision::kBf16 ? device.blas.gemm_bf16 : device.blas.gemm) {
  const int64_t vocab = gpt2_padded_vocab(spec), context = spec.block_size, channels = spec.n_embd;
  set_layout(gpt2_tensors(spec));

  const int64_t rows = options.max_examples * context;
  tokens_ = DeviceBuffer<int32_t>(device, rows);
  targets_ = DeviceBuffer<int32_t>(device, rows);
  for (int64_t block = 0; block <= spec.n_layer; ++block) residuals_.push_back(activation_buffer(rows * channels));
  for (int64_t block = 0; block < (options.recompute ? 1 : spec.n_layer); ++block)
    blocks_.push_back(block_activations());
  ln_f_ = activation_buffer(rows * channels);
  ln_f_mean_ = activation_buffer(rows);
  ln_f_rstd_ = activation_buffer(rows);
  logits_ = activation_buffer(rows * vocab);
  grad_logits_ = activation_buffer(rows * vocab);
  grad_residual_ = activation_buffer(rows * channels);
  grad_normed_ = activation_buffer(rows * channels);
  grad_wide_ = activation_buffer(rows * 4 * channels);
}

DeviceBuffer<float> Gpt2::activation_buffer(int64_t count) { return DeviceBuffer<float>(device_, count); }

Gpt2::BlockActivations Gpt2::block_activations() {
  const int64_t rows = options_.max_examples * spec_.block_size, channels = spec_.n_embd;
  BlockActivations block;
  block.ln1 = activation_buffer(rows * channels);
  block.ln1_mean = activation_buffer(rows);
  block.ln1_rstd = activation_buffer(rows);
  block.qkv = activation_buffer(rows * 3 * channels);
  block.attention = activation_buffer(rows * channels);
  block.lse = activation_buffer(rows * spec_.n_head);
  block.residual = activation_buffer(rows * channels);
  block.ln2 = activation_buffer(rows * channels);
  block.ln2_mean = activation_buffer(rows);
  block.ln2_rstd = activation_buffer(rows);
  block.fc = activation_buffer(rows * 4 * channels);
  block.gelu = activation_buffer(rows * 4 * channels);
  return block;
}

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

void Gpt2::matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
                  const float* b, bool accumulate, float* c) {
  gemm_(stream_, dense_gemm(transpose_a, transpose_b, m, n, k, 1.0f, a, b, accumulate ? 1.0f : 0.0f, c));
}

Gpt2::Shape Gpt2::load_batch(const Batch& batch) {
  const Shape shape{batch.examples, spec_.block_size};
  if (shape.batch < 1 || shape.batch > options_.max_examples)
    throw std::logic_error(fmt::format("a batch of {} sequences, outside [1, {}]", shape.batch, options_.max_examples));
  for (const char* name : {"tokens", "targets"}) {
    const HostTensor& tensor = batch.tensor(name);
    if (tensor.dtype != DType::kInt32 || tensor.shape != std::vector<int64_t>{shape.batch, shape.seq})
      throw std::logic_error(fmt::format("batch tensor \"{}\" is not int32 [{}, {}]", name, shape.batch, shape.seq));
    // The embedding and the loss index with them: a bad id would read outside the tensors.
    for (int32_t token : tensor.ints)
      if (token < 0 || token >= spec_.vocab_size)
        throw std::logic_error(fmt::format("batch tensor \"{}\" holds token {}, outside [0, {})", name, token,
                                           spec_.vocab_size));
  }
  const size_t bytes = static_cast<size_t>(shape.rows()) * sizeof(int32_t);
  device_.memory.upload(stream_, tokens_.get(), batch.ints("tokens"), bytes);
  device_.memory.upload(stream_, targets_.get(), batch.ints("targets"), bytes);
  return shape;
}

void Gpt2::forward(Shape shape) {
  const std::vector<ParameterSlice>& layout = parameter_layout();
  embedding_.embedding_forward(stream_, residuals_[0].get(), tokens_.get(), parameters() + layout[kWte].offset,
                               parameters() + layout[kWpe].offset, shape.batch, shape.seq, spec_.n_embd);
  for (int64_t block = 0; block < spec_.n_layer; ++block) block_forward(block, shape, true);
  const ParameterSlice& ln_f_weight = layout[layout.size() - 2];
  const ParameterSlice& ln_f_bias = layout[layout.size() - 1];
  norm_.layernorm_forward(stream_, ln_f_.get(), ln_f_mean_.get(), ln_f_rstd_.get(), residuals_.back().get(),
                          parameters() + ln_f_weight.offset, parameters() + ln_f_bias.offset, shape.rows(),
                          spec_.n_embd, kLayerNormEps);
}

void Gpt2::block_forward(int64_t block, Shape shape, bool write_output) {
  const int64_t rows = shape.rows(), channels = spec_.n_embd;
  const ElementwiseOps& elementwise = device_.elementwise;
  BlockActivations& a = activations_of(block);
  const float* input = residuals_[static_cast<size_t>(block)].get();

  norm_.layernorm_forward(stream_, a.ln1.get(), a.ln1_mean.get(), a.ln1_rstd.get(), input,
                          parameter(block, kLn1Weight), parameter(block, kLn1Bias), rows, channels, kLayerNormEps);
  matmul(false, false, rows, 3 * channels, channels, a.ln1.get(), parameter(block, kAttnWeight), false, a.qkv.get());
  elementwise.bias_act_forward(stream_, a.qkv.get(), parameter(block, kAttnBias), a.qkv.get(), rows, 3 * channels,
                               Activation::kNone);
  attention_.attention_forward(stream_, a.attention.get(), a.lse.get(), a.qkv.get(), shape.batch, shape.seq,
                               channels, spec_.n_head);
  matmul(false, false, rows, channels, channels, a.attention.get(), parameter(block, kAttnProjWeight), false,
         a.residual.get());
  elementwise.bias_act_forward(stream_, a.residual.get(), parameter(block, kAttnProjBias), a.residual.get(), rows,
                               channels, Activation::kNone);
  elementwise.add(stream_, a.residual.get(), a.residual.get(), input, rows * channels);

  norm_.layernorm_forward(stream_, a.ln2.get(), a.ln2_mean.get(), a.ln2_rstd.get(), a.residual.get(),
                          parameter(block, kLn2Weight), parameter(block, kLn2Bias), rows, channels, kLayerNormEps);
  matmul(false, false, rows, 4 * channels, channels, a.ln2.get(), parameter(block, kFcWeight), false, a.fc.get());
  elementwise.bias_act_forward(stream_, a.fc.get(), parameter(block, kFcBias), a.gelu.get(), rows, 4 * channels,
                               Activation::kGeluTanh);
  if (!write_output) return;
  float* output = residuals_[static_cast<size_t>(block + 1)].get();
  matmul(false, false, rows, channels, 4 * channels, a.gelu.get(), parameter(block, kFcProjWeight), false, output);
  elementwise.bias_act_forward(stream_, output, parameter(block, kFcProjBias), output, rows, channels,
                               Activation::kNone);
  elementwise.add(stream_, output, output, a.residual.get(), rows * channels);
}

void Gpt2::block_backward(int64_t block, Shape shape) {
  const int64_t rows = shape.rows(), channels = spec_.n_embd;
  const ElementwiseOps& elementwise = device_.elementwise;
  BlockActivations& a = activations_of(block);
  // dL/d(the residual stream): the residual adds pass it through unchanged, and each
  // LayerNorm's backward adds its branch's contribution.
  float* grad = grad_residual_.get();
  float* grad_normed = grad_normed_.get();
  float* grad_wide = grad_wide_.get();

  // MLP: output = residual + gelu(ln2 W_fc + b_fc) W_proj + b_proj.
  elementwise.bias_act_backward(stream_, grad, nullptr, nullptr, grad, gradient(block, kFcProjBias), rows, channels,
                                Activation::kNone);
  matmul(true, false, 4 * channels, channels, rows, a.gelu.get(), grad, true, gradient(block, kFcProjWeight));
  matmul(false, true, rows, 4 * channels, channels, grad, parameter(block, kFcProjWeight), false, grad_wide);
  elementwise.bias_act_backward(stream_, grad_wide, a.fc.get(), a.gelu.get(), grad_wide, gradient(block, kFcBias),
                                rows, 4 * channels, Activation::kGeluTanh);
  matmul(true, false, channels, 4 * channels, rows, a.ln2.get(), grad_wide, true, gradient(block, kFcWeight));
  matmul(false, true, rows, channels, 4 * channels, grad_wide, parameter(block, kFcWeight), false, grad_normed);
  norm_.layernorm_backward(stream_, grad, gradient(block, kLn2Weight), gradient(block, kLn2Bias), grad_normed,
                           a.residual.get(), parameter(block, kLn2Weight), a.ln2_mean.get(), a.ln2_rstd.get(), rows,
                           channels);

  // Attention: residual = input + attention(ln1 W_attn + b_attn) W_proj + b_proj.
  elementwise.bias_act_backward(stream_, grad, nullptr, nullptr, grad, gradient(block, kAttnProjBias), rows,
                                channels, Activation::kNone);
  matmul(true, false, channels, channels, rows, a.attention.get(), grad, true, gradient(block, kAttnProjWeight));
  matmul(false, true, rows, channels, channels, grad, parameter(block, kAttnProjWeight), false, grad_normed);
  attention_.attention_backward(stream_, grad_wide, grad_normed, a.qkv.get(), a.attention.get(), a.lse.get(),
                                shape.batch, shape.seq, channels, spec_.n_head);
  elementwise.bias_act_backward(stream_, grad_wide, nullptr, nullptr, grad_wide, gradient(block, kAttnBias), rows,
                                3 * channels, Activation::kNone);
  matmul(true, false, channels, 3 * channels, rows, a.ln1.get(), grad_wide, true, gradient(block, kAttnWeight));
  matmul(false, true, rows, channels, 3 * channels, grad_wide, parameter(block, kAttnWeight), false, grad_normed);
  norm_.layernorm_backward(stream_, grad, gradient(block, kLn1Weight), gradient(block, kLn1Bias), grad_normed,
                           residuals_[static_cast<size_t>(block)].get(), parameter(block, kLn1Weight),
                           a.ln1_mean.get(), a.ln1_rstd.get(), rows, channels);
}

BatchResult Gpt2::lm_head_and_loss(Shape shape, float* grad_logits, float grad_scale) {
  // Over the padded vocabulary: its zero rows give logits the loss skips.
  const float* wte = parameters() + parameter_layout()[kWte].offset;
  const int64_t padded_vocab = gpt2_padded_vocab(spec_);
  matmul(false, true, shape.rows(), padded_vocab, spec_.n_embd, ln_f_.get(), wte, false, logits_.get());
  BatchResult result;
  device_.loss.softmax_cross_entropy(stream_, logits_.get(), targets_.get(), grad_logits, shape.rows(),
                                     spec_.vocab_size, padded_vocab, grad_scale, &result.loss_sum, &result.correct);
  return result;
}

BatchResult Gpt2::forward_backward(const Batch& batch, float grad_scale, const LayerDone& layer_done) {
  const Shape shape = load_batch(batch);
  forward(shape);
  const BatchResult result = lm_head_and_loss(shape, grad_logits_.get(), grad_scale);

  const std::vector<ParameterSlice>& layout = parameter_layout();
  const int64_t rows = shape.rows(), channels = spec_.n_embd, vocab = gpt2_padded_vocab(spec_);
  auto report = [&layer_done](int64_t offset, int64_t count) {
    if (layer_done) layer_done(offset, count);
  };
  // The tied head: logits = ln_f wte^T, so wte's gradient gets ln_f^T-weighted logit gradients
  // here and the embedding's below. Over the padded rows too, whose logit gradients are 0: their
  // gradient stays exactly 0.
  const ParameterSlice& wte = layout[kWte];
  matmul(true, false, vocab, channels, rows, grad_logits_.get(), ln_f_.get(), true, gradients() + wte.offset);
  matmul(false, false, rows, channels, vocab, grad_logits_.get(), parameters() + wte.offset, false,
         grad_normed_.get());
  const ParameterSlice& ln_f_weight = layout[layout.size() - 2];
  const ParameterSlice& ln_f_bias = layout[layout.size() - 1];
  device_.memory.fill_zero(stream_, grad_residual_.get(), rows * channels);
  norm_.layernorm_backward(stream_, grad_residual_.get(), gradients() + ln_f_weight.offset,
                           gradients() + ln_f_bias.offset, grad_normed_.get(), residuals_.back().get(),
                           parameters() + ln_f_weight.offset, ln_f_mean_.get(), ln_f_rstd_.get(), rows, channels);
  report(ln_f_weight.offset, ln_f_weight.count + ln_f_bias.count);

  for (int64_t block = spec_.n_layer - 1; block >= 0; --block) {
    // The shared scratch still holds the last block's activations from the forward pass.
    if (options_.recompute && block != spec_.n_layer - 1) block_forward(block, shape, false);
    block_backward(block, shape);
    const ParameterSlice& first = slice(block, kLn1Weight);
    const ParameterSlice& last = slice(block, kFcProjBias);
    report(first.offset, last.offset + last.count - first.offset);
  }

  const ParameterSlice& wpe = layout[kWpe];
  embedding_.embedding_backward(stream_, gradients() + wte.offset, gradients() + wpe.offset, grad_residual_.get(),
                                tokens_.get(), shape.batch, shape.seq, channels);
  report(wte.offset, wpe.offset + wpe.count - wte.offset);
  return result;
}

BatchResult Gpt2::evaluate(const Batch& batch) {
  const Shape shape = load_batch(batch);
  forward(shape);
  return lm_head_and_loss(shape, nullptr, 0.0f);
}

void Gpt2::next_token_logits(const int32_t* tokens, int64_t length, float* logits) {
  if (length < 1 || length > spec_.block_size)
    throw std::logic_error(fmt::format("{} tokens of context, outside [1, {}]", length, spec_.block_size));
  device_.memory.upload(stream_, tokens_.get(), tokens, static_cast<size_t>(length) * sizeof(int32_t));
  forward({1, length});
  // Only the last position's logits are wanted: a [1, C] x [C, V] product.
  const float* wte = parameters() + parameter_layout()[kWte].offset;
  const float* last = ln_f_.get() + (length - 1) * spec_.n_embd;
  matmul(false, true, 1, gpt2_padded_vocab(spec_), spec_.n_embd, last, wte, false, logits_.get());
  device_.memory.download(stream_, logits, logits_.get(), static_cast<size_t>(spec_.vocab_size) * sizeof(float));
}

std::unique_ptr<Model> make_gpt2(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  return std::make_unique<Gpt2>(std::get<Gpt2Spec>(spec.config), device, options);
}

ModelFootprint gpt2_footprint(const ModelSpec& model, const ModelOptions& options) {
  const auto& spec = std::get<Gpt2Spec>(model.config);
  const int64_t rows = options.max_examples * spec.block_size, channels = spec.n_embd, vocab = gpt2_padded_vocab(spec);
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float)), kInt = static_cast<int64_t>(sizeof(int32_t));
  ModelFootprint footprint = parameter_footprint(gpt2_tensors(spec));
  // The constructor's buffers: each block's input and ln_f's (residuals_); the blocks'
  // activations, or one block's with recompute; ln_f's output, mean and rstd; the logits and
  // their gradient; grad_residual_, grad_normed_ and grad_wide_ (4C).
  const int64_t blocks = options.recompute ? 1 : spec.n_layer;
  const int64_t activation_floats = (spec.n_layer + 1) * rows * channels +
                                    blocks * block_activation_floats(spec, rows) + rows * (channels + 2) +
                                    2 * rows * vocab + rows * (2 * channels + 4 * channels);
  footprint.activation_bytes = activation_floats * kFloat + 2 * rows * kInt;  // + tokens_ and targets_
  // The attention keeps a seq x seq matrix of probabilities for forward, two for backward.
  footprint.cpu_scratch_bytes = 3 * spec.block_size * spec.block_size * kFloat;
  if (options.precision == Precision::kBf16) {
    // gemm_bf16 rounds each operand into a buffer of its own. The widest A are the logits'
    // gradient [rows, vocab] and the MLP's [rows, 4C]; the widest B are wte [vocab, C], c_fc's
    // weights [C, 4C] and, for c_proj's weight gradient, the MLP's [rows, 4C].
    const int64_t widest_a = rows * std::max(vocab, 4 * channels);
    const int64_t widest_b = std::max({vocab * channels, 4 * channels * channels, rows * 4 * channels});
    footprint.cpu_scratch_bytes += (widest_a + widest_b) * kFloat;
  }
  footprint.host_batch_bytes = 2 * rows * kInt;
  footprint.terms_per_example = spec.block_size;
  footprint.term_unit = "tokens";
  footprint.training_flops_per_term = training_flops_per_token(spec, footprint.parameters);
  return footprint;
}

}  // namespace trainctl

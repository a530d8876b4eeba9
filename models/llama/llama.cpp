// Llama on the device seam: see llama.h.
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include <fmt/format.h>

#include "language_model.h"
#include "rng.h"

namespace trainctl {

namespace {

constexpr double kLlamaInitStd = 0.02;

// Names of a block's tensors after "model.layers.<i>.", in BlockTensor order.
constexpr const char* kLlamaBlockTensorNames[] = {
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
    "mlp.down_proj.weight",    "input_layernorm.weight",  "post_attention_layernorm.weight"};

// Layout indices: the embedding, then the blocks, then the final norm and, untied, the LM head.
constexpr size_t kLlamaFirstBlock = 1;

// The first block's layer (ParameterSlice::layer): 0 where the tied embedding is kept, else 1,
// after the embedding's.
int llama_first_block_layer(const LlamaSpec& spec) { return spec.tie_embeddings ? 0 : 1; }

// The width of the query heads, and of the queries, keys and values side by side (qkv's row).
int64_t query_width(const LlamaSpec& spec) { return spec.n_head * spec.head_dim; }
int64_t qkv_width(const LlamaSpec& spec) { return (spec.n_head + 2 * spec.n_kv_head) * spec.head_dim; }

// LlamaForCausalLM's tensors in state_dict order (nn.Linear weights [out, in]). The layers: the
// embedding (kept when tied, being the head too; else the first layer), each block, then the
// final norm with the untied head.
std::vector<ParameterSlice> llama_tensors(const LlamaSpec& spec) {
  const int64_t channels = spec.n_embd, kv_width = spec.n_kv_head * spec.head_dim, mlp = spec.intermediate_size;
  const std::vector<int64_t> block_shapes[] = {
      {query_width(spec), channels}, {kv_width, channels}, {kv_width, channels}, {channels, query_width(spec)},
      {mlp, channels},               {mlp, channels},      {channels, mlp},      {channels},
      {channels}};
  // Weight decay on the matrices (the embeddings included), not on the RMSNorm weights.
  std::vector<ParameterSlice> tensors;
  auto add = [&tensors](std::string name, std::vector<int64_t> shape) {
    const bool decay = shape.size() == 2;
    tensors.push_back({std::move(name), std::move(shape), 0, 0, decay});
  };
  const int first_block = llama_first_block_layer(spec);
  add("model.embed_tokens.weight", {spec.vocab_size, channels});
  tensors.back().layer = spec.tie_embeddings ? kKeptLayer : 0;
  for (int64_t block = 0; block < spec.n_layer; ++block)
    for (size_t tensor = 0; tensor < std::size(block_shapes); ++tensor) {
      add(fmt::format("model.layers.{}.{}", block, kLlamaBlockTensorNames[tensor]), block_shapes[tensor]);
      tensors.back().layer = first_block + static_cast<int>(block);
    }
  add("model.norm.weight", {channels});
  if (!spec.tie_embeddings) add("lm_head.weight", {spec.vocab_size, channels});
  for (size_t i = kLlamaFirstBlock + static_cast<size_t>(spec.n_layer) * std::size(block_shapes); i < tensors.size(); ++i)
    tensors[i].layer = first_block + static_cast<int>(spec.n_layer);
  return tensors;
}

// 6 N + 12 n_layer n_head head_dim block_size (nanoGPT's and PaLM's estimate), N the parameters
// that take part in a token's matrix products: all but an untied embedding, which is looked up.
double llama_flops_per_token(const LlamaSpec& spec, int64_t parameters) {
  const int64_t looked_up = spec.tie_embeddings ? 0 : spec.vocab_size * spec.n_embd;
  return 6.0 * static_cast<double>(parameters - looked_up) +
         12.0 * static_cast<double>(spec.n_layer) * static_cast<double>(query_width(spec)) *
             static_cast<double>(spec.block_size);
}

// The rotary angles' tables, [block_size, head_dim / 2] each: cos and sin of position * inv_freq,
// the angle rounded to float as transformers' LlamaRotaryEmbedding forms it (a float product),
// its cosine and sine computed in double and rounded once.
std::vector<float> rotary_table(const LlamaSpec& spec, double (*function)(double)) {
  const std::vector<float> inverse_frequencies = llama_inverse_frequencies(spec);
  const auto half = static_cast<int64_t>(inverse_frequencies.size());
  std::vector<float> table(static_cast<size_t>(spec.block_size * half));
  for (int64_t position = 0; position < spec.block_size; ++position)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(position) * inverse_frequencies[static_cast<size_t>(i)];
      table[static_cast<size_t>(position * half + i)] = static_cast<float>(function(angle));
    }
  return table;
}

}  // namespace

std::vector<float> llama_inverse_frequencies(const LlamaSpec& spec) {
  // transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), in float.
  const int64_t half = spec.head_dim / 2;
  const auto base = static_cast<float>(spec.rope_theta);
  std::vector<float> frequencies(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(spec.head_dim);
    frequencies[static_cast<size_t>(i)] = 1.0f / static_cast<float>(std::pow(double{base}, double{exponent}));
  }
  if (!spec.rope_scaling) return frequencies;
  // _compute_llama3_parameters: Python's scalars meet float tensors as floats, and `s / t` is
  // t.reciprocal() * s.
  const Llama3RopeScaling& scaling = *spec.rope_scaling;
  const auto factor = static_cast<float>(scaling.factor);
  const auto low_freq_factor = static_cast<float>(scaling.low_freq_factor);
  const auto old_context = static_cast<double>(scaling.original_max_position_embeddings);
  const auto low_freq_wavelen = static_cast<float>(old_context / scaling.low_freq_factor);
  const auto high_freq_wavelen = static_cast<float>(old_context / scaling.high_freq_factor);
  const auto factor_span = static_cast<float>(scaling.high_freq_factor - scaling.low_freq_factor);
  const auto two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (float& frequency : frequencies) {
    const float wavelen = (1.0f / frequency) * two_pi;
    const float scaled = wavelen > low_freq_wavelen ? frequency / factor : frequency;
    const float smooth = ((1.0f / wavelen) * static_cast<float>(old_context) - low_freq_factor) / factor_span;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    frequency = medium ? smoothed : scaled;
  }
  return frequencies;
}

// What a block's backward reads, from its forward.
struct LlamaBlockActivations {
  TypedBuffer input_norm;
  DeviceBuffer<float> input_rstd;
  TypedBuffer qkv;  // the queries and keys rotated
  TypedBuffer attention;
  DeviceBuffer<float> lse;
  DeviceBuffer<float> residual;  // the stream after the attention's residual add
  TypedBuffer post_norm;
  DeviceBuffer<float> post_rstd;
  TypedBuffer gate_up, hidden;  // gate_proj's and up_proj's outputs, and SwiGLU's
};

struct Llama::Buffers {
  DeviceBuffer<int32_t> tokens, targets;
  DeviceBuffer<float> cos, sin;                // RoPE's tables [block_size, head_dim / 2]
  std::vector<DeviceBuffer<float>> residuals;  // [n_layer + 1]: each block's input, then the final norm's
  std::vector<LlamaBlockActivations> blocks;   // one per block, or the shared scratch
  // An attention's or an MLP's output, until the RMSNorm after it adds it to the residual stream.
  TypedBuffer branch;
  TypedBuffer final_norm;
  DeviceBuffer<float> final_rstd;
  TypedBuffer logits;  // then, in training, their gradient
  // Backward: dL/d(the residual stream) in fp32, and in bf16 its copy for the GEMMs that read it;
  // dL/d(an RMSNorm's output, or the attention's), dL/d(SwiGLU's output), and dL/d(qkv or
  // gate_up), the widest.
  DeviceBuffer<float> grad_residual;
  TypedBuffer grad_residual_copy;
  TypedBuffer grad_normed, grad_hidden, grad_wide;

  LlamaBlockActivations& of(int64_t block, bool recompute) { return blocks[recompute ? 0 : block]; }
};

namespace {

LlamaBlockActivations llama_block_activations(BufferPlan& plan, int64_t rows, const LlamaSpec& spec) {
  const int64_t channels = spec.n_embd, mlp = spec.intermediate_size;
  LlamaBlockActivations block;
  block.input_norm = plan.activations(rows * channels);
  block.input_rstd = plan.buffer<float>(rows);
  block.qkv = plan.activations(rows * qkv_width(spec));
  block.attention = plan.activations(rows * query_width(spec));
  block.lse = plan.buffer<float>(rows * spec.n_head);
  block.residual = plan.buffer<float>(rows * channels);
  block.post_norm = plan.activations(rows * channels);
  block.post_rstd = plan.buffer<float>(rows);
  block.gate_up = plan.activations(rows * 2 * mlp);
  block.hidden = plan.activations(rows * mlp);
  return block;
}

}  // namespace

Llama::Buffers Llama::plan_buffers(const LlamaSpec& spec, const ModelOptions& options, BufferPlan& plan) {
  const int64_t rows = options.max_examples * spec.block_size, channels = spec.n_embd;
  Buffers buffers;
  buffers.tokens = plan.buffer<int32_t>(rows);
  buffers.targets = plan.buffer<int32_t>(rows);
  buffers.cos = plan.buffer<float>(spec.block_size * spec.head_dim / 2);
  buffers.sin = plan.buffer<float>(spec.block_size * spec.head_dim / 2);
  for (int64_t block = 0; block <= spec.n_layer; ++block)
    buffers.residuals.push_back(plan.buffer<float>(rows * channels));
  for (int64_t block = 0; block < (options.recompute ? 1 : spec.n_layer); ++block)
    buffers.blocks.push_back(llama_block_activations(plan, rows, spec));
  buffers.branch = plan.activations(rows * channels);
  buffers.final_norm = plan.activations(rows * channels);
  buffers.final_rstd = plan.buffer<float>(rows);
  buffers.logits = plan.activations(rows * spec.vocab_size);
  buffers.grad_residual = plan.buffer<float>(rows * channels);
  if (plan.activation_type() != ElementType::kF32) buffers.grad_residual_copy = plan.activations(rows * channels);
  buffers.grad_normed = plan.activations(rows * std::max(channels, query_width(spec)));
  buffers.grad_hidden = plan.activations(rows * spec.intermediate_size);
  buffers.grad_wide = plan.activations(rows * std::max(2 * spec.intermediate_size, qkv_width(spec)));
  return buffers;
}

Llama::Llama(const LlamaSpec& spec, const Device& device, const ModelOptions& options)
    : LanguageModel(device, options),
      spec_(spec),
      options_(options),
      norm_(device.norm.value()),
      embedding_(device.embedding.value()),
      attention_(device.attention.value()),
      rope_(device.rope.value()) {
  set_layout(llama_tensors(spec));
  BufferPlan plan(&device, activation_type());
  buffers_ = std::make_unique<Buffers>(plan_buffers(spec, options, plan));
  const std::vector<float> cos = rotary_table(spec, [](double angle) { return std::cos(angle); });
  const std::vector<float> sin = rotary_table(spec, [](double angle) { return std::sin(angle); });
  device.memory.upload(stream_, buffers_->cos.get(), cos.data(), cos.size() * sizeof(float));
  device.memory.upload(stream_, buffers_->sin.get(), sin.data(), sin.size() * sizeof(float));
}

Llama::~Llama() = default;

const ParameterSlice& Llama::slice(int64_t block, BlockTensor tensor) const {
  return parameter_layout()[kLlamaFirstBlock + static_cast<size_t>(block * kBlockTensors + tensor)];
}

const ParameterSlice& Llama::final_norm() const {
  return parameter_layout()[kLlamaFirstBlock + static_cast<size_t>(spec_.n_layer * kBlockTensors)];
}

const ParameterSlice& Llama::lm_head() const {
  return spec_.tie_embeddings ? embedding() : parameter_layout().back();
}

AttentionShape Llama::attention_shape(Shape shape) const {
  return {shape.batch, shape.seq, spec_.n_head, spec_.n_kv_head, spec_.head_dim};
}

void Llama::init_parameters(uint64_t seed) {
  Rng rng(seed, kWeightInitStream);
  std::vector<float> host(static_cast<size_t>(parameter_count()));
  for (const ParameterSlice& slice : parameter_layout()) {
    float* values = host.data() + slice.offset;
    const bool norm_weight = slice.shape.size() == 1;  // the only 1-D tensors
    for (int64_t i = 0; i < slice.count; ++i)
      values[i] = norm_weight ? 1.0f : static_cast<float>(kLlamaInitStd * rng.normal());
  }
  upload_parameters(host);
}

double Llama::training_flops_per_term() const { return llama_flops_per_token(spec_, parameter_count()); }

void Llama::matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, ConstTypedPtr a,
                   ConstTypedPtr b, bool accumulate, TypedPtr c) {
  device_.blas.gemm(stream_, dense_gemm(transpose_a, transpose_b, m, n, k, 1.0f, a, b, accumulate ? 1.0f : 0.0f, c));
}

Llama::Shape Llama::load_batch(const Batch& batch) {
  const int64_t examples =
      upload_token_batch(device_, stream_, batch, {spec_.block_size, spec_.vocab_size, options_.max_examples},
                         buffers_->tokens.get(), buffers_->targets.get());
  return {examples, spec_.block_size};
}

void Llama::forward(Shape shape) {
  Buffers& buffers = *buffers_;
  enter_layer(embedding().layer, Pass::kForward);
  embedding_.embedding_forward(stream_, buffers.residuals[0].get(), buffers.tokens.get(), weights_of(embedding()),
                               nullptr, shape.batch, shape.seq, spec_.n_embd);
  for (int64_t block = 0; block < spec_.n_layer; ++block) {
    enter_layer(block_layer(block), Pass::kForward);
    block_forward(block, shape, true);
  }
  // The final norm, with the last MLP's residual add.
  enter_layer(final_norm().layer, Pass::kForward);
  norm_.rmsnorm_forward(stream_, buffers.final_norm.get(), buffers.final_rstd.get(),
                        buffers.of(spec_.n_layer - 1, options_.recompute).residual.get(), buffers.branch.get(),
                        buffers.residuals.back().get(), weights_of(final_norm()), shape.rows(), spec_.n_embd,
                        static_cast<float>(spec_.rms_norm_eps));
}

void Llama::block_forward(int64_t block, Shape shape, bool write_output) {
  Buffers& buffers = *buffers_;
  const int64_t rows = shape.rows(), channels = spec_.n_embd, mlp = spec_.intermediate_size;
  const auto eps = static_cast<float>(spec_.rms_norm_eps);
  LlamaBlockActivations& a = buffers.of(block, options_.recompute);
  float* input = buffers.residuals[static_cast<size_t>(block)].get();

  // input_layernorm. In the forward pass the block's input is the previous block's residual
  // stream plus its MLP's output, added here; recompute finds the input saved.
  if (block > 0 && write_output) {
    norm_.rmsnorm_forward(stream_, a.input_norm.get(), a.input_rstd.get(),
                          buffers.of(block - 1, options_.recompute).residual.get(), buffers.branch.get(), input,
                          parameter(block, kInputNorm), rows, channels, eps);
  } else {
    norm_.rmsnorm_forward(stream_, a.input_norm.get(), a.input_rstd.get(), input, {}, nullptr,
                          parameter(block, kInputNorm), rows, channels, eps);
  }
  // q_proj, k_proj and v_proj as one weight.
  matmul(false, true, rows, qkv_width(spec_), channels, a.input_norm.get(), compute(block, kQProj), false,
         a.qkv.get());
  const AttentionShape heads = attention_shape(shape);
  rope_.rope_forward(stream_, a.qkv.get(), buffers.cos.get(), buffers.sin.get(), heads);
  attention_.attention_forward(stream_, a.attention.get(), a.lse.get(), a.qkv.get(), heads);
  matmul(false, true, rows, channels, query_width(spec_), a.attention.get(), compute(block, kOProj), false,
         buffers.branch.get());

  // post_attention_layernorm, with the attention's residual add.
  norm_.rmsnorm_forward(stream_, a.post_norm.get(), a.post_rstd.get(), input, buffers.branch.get(), a.residual.get(),
                        parameter(block, kPostNorm), rows, channels, eps);
  // gate_proj and up_proj as one weight.
  matmul(false, true, rows, 2 * mlp, channels, a.post_norm.get(), compute(block, kGateProj), false, a.gate_up.get());
  device_.elementwise.swiglu_forward(stream_, a.hidden.get(), a.gate_up.get(), rows, mlp);
  if (!write_output) return;
  matmul(false, true, rows, channels, mlp, a.hidden.get(), compute(block, kDownProj), false, buffers.branch.get());
}

void Llama::block_backward(int64_t block, Shape shape) {
  Buffers& buffers = *buffers_;
  const int64_t rows = shape.rows(), channels = spec_.n_embd, mlp = spec_.intermediate_size;
  LlamaBlockActivations& a = buffers.of(block, options_.recompute);
  // dL/d(the residual stream): the residual adds pass it through unchanged, and each RMSNorm's
  // backward adds its branch's contribution (and copies the sum for the GEMMs in bf16).
  float* grad = buffers.grad_residual.get();
  const TypedPtr grad_copy = buffers.grad_residual_copy.get();
  const ConstTypedPtr grad_read = grad_copy ? ConstTypedPtr(grad_copy) : ConstTypedPtr(grad);
  const TypedPtr grad_normed = buffers.grad_normed.get();
  const TypedPtr grad_wide = buffers.grad_wide.get();

  // MLP: output = residual + (silu(post_norm W_gate^T) * post_norm W_up^T) W_down^T.
  matmul(true, false, channels, mlp, rows, grad_read, a.hidden.get(), true, gradient(block, kDownProj));
  matmul(false, false, rows, mlp, channels, grad_read, compute(block, kDownProj), false, buffers.grad_hidden.get());
  device_.elementwise.swiglu_backward(stream_, grad_wide, buffers.grad_hidden.get(), a.gate_up.get(), rows, mlp);
  matmul(true, false, 2 * mlp, channels, rows, grad_wide, a.post_norm.get(), true, gradient(block, kGateProj));
  matmul(false, false, rows, channels, 2 * mlp, grad_wide, compute(block, kGateProj), false, grad_normed);
  norm_.rmsnorm_backward(stream_, grad, grad_copy, gradient(block, kPostNorm), grad_normed, a.residual.get(),
                         parameter(block, kPostNorm), a.post_rstd.get(), rows, channels);

  // Attention: residual = input + attention(rope(input_norm W_qkv^T)) W_o^T.
  const int64_t queries = query_width(spec_);
  const AttentionShape heads = attention_shape(shape);
  matmul(true, false, channels, queries, rows, grad_read, a.attention.get(), true, gradient(block, kOProj));
  matmul(false, false, rows, queries, channels, grad_read, compute(block, kOProj), false, grad_normed);
  attention_.attention_backward(stream_, grad_wide, grad_normed, a.qkv.get(), a.attention.get(), a.lse.get(), heads);
  rope_.rope_backward(stream_, grad_wide, buffers.cos.get(), buffers.sin.get(), heads);
  matmul(true, false, qkv_width(spec_), channels, rows, grad_wide, a.input_norm.get(), true, gradient(block, kQProj));
  matmul(false, false, rows, channels, qkv_width(spec_), grad_wide, compute(block, kQProj), false, grad_normed);
  norm_.rmsnorm_backward(stream_, grad, grad_copy, gradient(block, kInputNorm), grad_normed,
                         buffers.residuals[static_cast<size_t>(block)].get(), parameter(block, kInputNorm),
                         a.input_rstd.get(), rows, channels);
}

void Llama::lm_head_and_loss(Shape shape, std::optional<float> grad_scale, BatchResult* totals) {
  Buffers& buffers = *buffers_;
  matmul(false, true, shape.rows(), spec_.vocab_size, spec_.n_embd, buffers.final_norm.get(),
         compute_weights_of(lm_head()), false, buffers.logits.get());
  device_.loss.softmax_cross_entropy(stream_, buffers.logits.get(), buffers.targets.get(), shape.rows(),
                                     spec_.vocab_size, spec_.vocab_size, grad_scale, &totals->loss_sum,
                                     &totals->correct);
}

void Llama::forward_backward_into(const Batch& batch, float grad_scale, BatchResult* totals,
                                  const LayerDone& layer_done) {
  Buffers& buffers = *buffers_;
  const Shape shape = load_batch(batch);
  forward(shape);
  lm_head_and_loss(shape, grad_scale, totals);

  const int64_t rows = shape.rows(), channels = spec_.n_embd, vocab = spec_.vocab_size;
  // The final norm's layer, which holds the untied head too.
  enter_layer(final_norm().layer, Pass::kBackward);
  // The head: logits = final_norm head^T. Tied, the embedding's gradient gets its share here and
  // the lookup's below.
  const TypedPtr grad_logits = buffers.logits.get();
  matmul(true, false, vocab, channels, rows, grad_logits, buffers.final_norm.get(), true, gradient_of(lm_head()));
  matmul(false, false, rows, channels, vocab, grad_logits, compute_weights_of(lm_head()), false,
         buffers.grad_normed.get());
  device_.memory.fill_zero(stream_, buffers.grad_residual.get(), static_cast<size_t>(rows * channels) * sizeof(float));
  norm_.rmsnorm_backward(stream_, buffers.grad_residual.get(), buffers.grad_residual_copy.get(),
                         gradient_of(final_norm()), buffers.grad_normed.get(), buffers.residuals.back().get(),
                         weights_of(final_norm()), buffers.final_rstd.get(), rows, channels);
  layer_gradients_done(final_norm().layer, layer_done);

  for (int64_t block = spec_.n_layer - 1; block >= 0; --block) {
    enter_layer(block_layer(block), Pass::kBackward);
    // The shared scratch still holds the last block's activations from the forward pass.
    if (options_.recompute && block != spec_.n_layer - 1) block_forward(block, shape, false);
    block_backward(block, shape);
    layer_gradients_done(block_layer(block), layer_done);
  }

  // Untied, the embedding is a layer of its own: entered for its gradients.
  if (embedding().layer != kKeptLayer) enter_layer(embedding().layer, Pass::kBackward);
  embedding_.embedding_backward(stream_, gradient_of(embedding()), nullptr, buffers.grad_residual.get(),
                                buffers.tokens.get(), shape.batch, shape.seq, channels);
  layer_gradients_done(embedding().layer, layer_done);
}

void Llama::evaluate_into(const Batch& batch, BatchResult* totals) {
  const Shape shape = load_batch(batch);
  forward(shape);
  lm_head_and_loss(shape, std::nullopt, totals);
}

void Llama::next_token_logits(const int32_t* tokens, int64_t length, float* logits) {
  if (length < 1 || length > spec_.block_size)
    throw std::logic_error(fmt::format("{} tokens of context, outside [1, {}]", length, spec_.block_size));
  Buffers& buffers = *buffers_;
  device_.memory.upload(stream_, buffers.tokens.get(), tokens, static_cast<size_t>(length) * sizeof(int32_t));
  forward({1, length});
  // Only the last position's logits are wanted: a [1, C] x [C, V] product.
  const TypedPtr last = buffers.final_norm.get() + (length - 1) * spec_.n_embd;
  matmul(false, true, 1, spec_.vocab_size, spec_.n_embd, last, compute_weights_of(lm_head()), false,
         buffers.logits.get());
  download_logits(device_, stream_, buffers.logits.get(), spec_.vocab_size, logits);
}

std::unique_ptr<Model> make_llama(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  return std::make_unique<Llama>(spec.as<LlamaSpec>(), device, options);
}

std::vector<ParameterSlice> llama_parameter_tensors(const ModelSpec& spec) {
  return llama_tensors(spec.as<LlamaSpec>());
}

ModelFootprint llama_footprint(const ModelSpec& model, const ModelOptions& options) {
  const auto& spec = model.as<LlamaSpec>();
  ModelFootprint footprint = language_model_footprint(
      llama_tensors(spec), options, spec.block_size, [&](BufferPlan& plan) { Llama::plan_buffers(spec, options, plan); });
  if (options.precision == Precision::kBf16) {
    // The bf16 ops widen their operands into float scratch of their own, and form a bf16 result
    // in float first. The widest GEMM A are the gradients of the logits [rows, vocab], of gate_up
    // [rows, 2 I] and of qkv, and the RMSNorms' outputs [rows, C]; the widest B are the weights
    // (the head [vocab, C], gate_up's [2 I, C], qkv's) and, for the weight gradients, the
    // activations [rows, I], [rows, n_head head_dim] and [rows, C]; the widest C are the
    // outputs [rows, vocab], [rows, 2 I], [rows, qkv] and [rows, C].
    const int64_t rows = options.max_examples * spec.block_size, channels = spec.n_embd;
    const int64_t widest_output = std::max({spec.vocab_size, 2 * spec.intermediate_size, qkv_width(spec), channels});
    const int64_t widest_b =
        std::max(widest_output * channels, rows * std::max({spec.intermediate_size, query_width(spec), channels}));
    footprint.cpu_scratch_bytes += (2 * rows * widest_output + widest_b) * static_cast<int64_t>(sizeof(float));
  }
  footprint.training_flops_per_term = llama_flops_per_token(spec, footprint.parameters);
  return footprint;
}

}  // namespace trainctl

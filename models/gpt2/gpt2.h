// GPT-2: Hugging Face's GPT2LMHeadModel without dropout, forward and backward on the device seam.
// Learned token and position embeddings, n_layer pre-LayerNorm blocks (causal multi-head
// attention, then a 4x MLP with tanh GELU), a final LayerNorm and an LM head tied to the token
// embedding; the loss is token cross-entropy. Parameters are named and shaped as in
// GPT2LMHeadModel.state_dict() (Conv1D weights in their [in, out] layout), minus the tied
// lm_head.weight and the attention mask buffers.
//
// With precision bf16 the activations and their gradients are stored in bf16 and the GEMMs read the
// parameters' bf16 compute copy, as autocast and llm.c do; the residual stream, the LayerNorm
// statistics, the loss and every parameter gradient stay fp32. The residual add is fused into the
// LayerNorm after it, bias and GELU into the GEMMs (cuBLASLt's epilogues), the bias gradients into
// the weight gradients' GEMMs, and the classifier writes the logits' gradient over the logits.
//
// Activation recompute keeps only each block's input (the residual stream entering it) and
// recomputes the block's forward into one shared scratch before its backward: the same ops in
// the same order, so gradients are bitwise those without it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gpt2_spec.h"
#include "model.h"

namespace trainctl {

// The rows of the embedding and the LM head in the flat buffers: vocab_size rounded up to a
// multiple of 128, as llm.c pads GPT-2's 50257 to 50304. Checkpoints hold only the vocab_size
// rows; the loss masks the others out of the softmax.
int64_t gpt2_padded_vocab(const Gpt2Spec& spec);

class Gpt2 : public LanguageModel {
 public:
  Gpt2(const Gpt2Spec& spec, const Device& device, const ModelOptions& options);
  ~Gpt2() override;

  // GPT-2's init: weights normal(0, 0.02), the residual output projections (c_proj) normal(0,
  // 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights 1; drawn in layout order.
  void init_parameters(uint64_t seed) override;
  void forward_backward_into(const Batch& batch, float grad_scale, BatchResult* totals,
                             const LayerDone& layer_done = {}) override;
  void evaluate_into(const Batch& batch, BatchResult* totals) override;

  int64_t loss_terms_per_example() const override { return spec_.block_size; }
  const char* term_unit() const override { return "tokens"; }
  // nanoGPT's estimate: 6 N + 12 n_layer n_embd block_size, N the parameters without wpe.
  double training_flops_per_term() const override;

  int64_t vocab_size() const override { return spec_.vocab_size; }
  int64_t context_size() const override { return spec_.block_size; }
  void next_token_logits(const int32_t* tokens, int64_t length, float* logits) override;

  // The device buffers for `options`, allocated (device given) or only counted (null).
  struct Buffers;
  static Buffers plan_buffers(const Gpt2Spec& spec, const ModelOptions& options, BufferPlan& plan);

 private:
  // The tensors of one block, in layout order.
  enum BlockTensor {
    kLn1Weight, kLn1Bias, kAttnWeight, kAttnBias, kAttnProjWeight, kAttnProjBias,
    kLn2Weight, kLn2Bias, kFcWeight, kFcBias, kFcProjWeight, kFcProjBias, kBlockTensors
  };
  struct Shape {
    int64_t batch = 0, seq = 0;
    int64_t rows() const { return batch * seq; }
  };
  // GPT-2's attention is multi-head: each query head has a key/value head of its own.
  AttentionShape attention_shape(Shape shape) const {
    return {shape.batch, shape.seq, spec_.n_head, spec_.n_head, spec_.n_embd / spec_.n_head};
  }

  const float* parameter(int64_t block, BlockTensor tensor) { return weights_of(slice(block, tensor)); }
  // The tensor as the GEMMs read it (the compute copy in bf16).
  ConstTypedPtr compute(int64_t block, BlockTensor tensor) { return compute_weights_of(slice(block, tensor)); }
  float* gradient(int64_t block, BlockTensor tensor) { return gradient_of(slice(block, tensor)); }
  const ParameterSlice& slice(int64_t block, BlockTensor tensor) const;
  // ln_f's layer, after the blocks'.
  int ln_f_layer() const { return static_cast<int>(spec_.n_layer); }

  // C = A B (+ C when accumulate), A [m, k] or stored [k, m] when transpose_a, likewise B; with
  // `epilogue` filled in by the caller where it has one.
  Gemm matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, ConstTypedPtr a, ConstTypedPtr b,
              bool accumulate, TypedPtr c) const;
  void run(const Gemm& gemm) { device_.blas.gemm(stream_, gemm); }
  // tokens hold the batch's tokens: the residual stream through every block, then ln_f.
  void forward(Shape shape);
  // Block `block`'s forward from its input; writes the MLP's output (the branch the next
  // LayerNorm adds to the residual stream) when `write_output` (recompute needs only the
  // activations).
  void block_forward(int64_t block, Shape shape, bool write_output);
  // From the residual stream's gradient at the block's output to its input, accumulating the
  // block's parameter gradients.
  void block_backward(int64_t block, Shape shape);
  // The logits of every position and the loss into totals, with the logits' gradient written over
  // them when grad_scale is given.
  void lm_head_and_loss(Shape shape, std::optional<float> grad_scale, BatchResult* totals);
  Shape load_batch(const Batch& batch);

  Gpt2Spec spec_;
  ModelOptions options_;
  const NormOps& norm_;
  const EmbeddingOps& embedding_;
  const AttentionOps& attention_;
  std::unique_ptr<Buffers> buffers_;
};
std::unique_ptr<Model> make_gpt2(const ModelSpec& spec, const Device& device, const ModelOptions& options);
std::vector<ParameterSlice> gpt2_parameter_tensors(const ModelSpec& spec);
ModelFootprint gpt2_footprint(const ModelSpec& spec, const ModelOptions& options);

}  // namespace trainctl

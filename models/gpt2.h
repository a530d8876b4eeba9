// GPT-2: Hugging Face's GPT2LMHeadModel without dropout, forward and backward on the device seam.
// Learned token and position embeddings, n_layer pre-LayerNorm blocks (causal multi-head
// attention, then a 4x MLP with tanh GELU), a final LayerNorm and an LM head tied to the token
// embedding; the loss is token cross-entropy. Parameters are named and shaped as in
// GPT2LMHeadModel.state_dict() (Conv1D weights in their [in, out] layout), minus the tied
// lm_head.weight and the attention mask buffers.
//
// Activation recompute keeps only each block's input (the residual stream entering it) and
// recomputes the block's forward into one shared scratch before its backward: the same ops in
// the same order, so gradients are bitwise those without it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model.h"
#include "registry.h"

namespace trainctl {

// The rows of the embedding and the LM head in the flat buffers: vocab_size rounded up to a
// multiple of 128, as llm.c pads GPT-2's 50257 to 50304. Checkpoints hold only the vocab_size
// rows; the loss masks the others out of the softmax.
int64_t gpt2_padded_vocab(const Gpt2Spec& spec);

class Gpt2 : public LanguageModel {
 public:
  Gpt2(const Gpt2Spec& spec, const Device& device, const ModelOptions& options);

  // GPT-2's init: weights normal(0, 0.02), the residual output projections (c_proj) normal(0,
  // 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights 1; drawn in layout order.
  void init_parameters(uint64_t seed) override;
  BatchResult forward_backward(const Batch& batch, float grad_scale, const LayerDone& layer_done = {}) override;
  BatchResult evaluate(const Batch& batch) override;

  int64_t loss_terms_per_example() const override { return spec_.block_size; }
  const char* term_unit() const override { return "tokens"; }
  // nanoGPT's estimate: 6 N + 12 n_layer n_embd block_size, N the parameters without wpe.
  double training_flops_per_term() const override;

  int64_t vocab_size() const override { return spec_.vocab_size; }
  int64_t context_size() const override { return spec_.block_size; }
  void next_token_logits(const int32_t* tokens, int64_t length, float* logits) override;

 private:
  // The tensors of one block, in layout order.
  enum BlockTensor {
    kLn1Weight, kLn1Bias, kAttnWeight, kAttnBias, kAttnProjWeight, kAttnProjBias,
    kLn2Weight, kLn2Bias, kFcWeight, kFcBias, kFcProjWeight, kFcProjBias, kBlockTensors
  };
  // What a block's backward reads, from its forward.
  struct BlockActivations {
    DeviceBuffer<float> ln1, ln1_mean, ln1_rstd;
    DeviceBuffer<float> qkv, attention, lse;
    DeviceBuffer<float> residual;  // the stream after the attention's residual add
    DeviceBuffer<float> ln2, ln2_mean, ln2_rstd;
    DeviceBuffer<float> fc, gelu;  // c_fc's pre-activation and its GELU
  };
  struct Shape {
    int64_t batch = 0, seq = 0;
    int64_t rows() const { return batch * seq; }
  };

  DeviceBuffer<float> activation_buffer(int64_t count);
  BlockActivations block_activations();
  const float* parameter(int64_t block, BlockTensor tensor) { return parameters() + slice(block, tensor).offset; }
  float* gradient(int64_t block, BlockTensor tensor) { return gradients() + slice(block, tensor).offset; }
  const ParameterSlice& slice(int64_t block, BlockTensor tensor) const;
  // The scratch of block `block`: its own without recompute, the shared one with it.
  BlockActivations& activations_of(int64_t block) { return blocks_[options_.recompute ? 0 : block]; }

  // C = A B (+ C when accumulate), A [m, k] or stored [k, m] when transpose_a, likewise B.
  void matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
              bool accumulate, float* c);
  // tokens_ holds the batch's tokens: the residual stream through every block, then ln_f.
  void forward(Shape shape);
  // Block `block`'s forward from residuals_[block]; writes residuals_[block + 1] when
  // `write_output` (recompute needs only the activations).
  void block_forward(int64_t block, Shape shape, bool write_output);
  // From grad_residual_ = dL/d(block output) to dL/d(block input), accumulating the block's
  // parameter gradients.
  void block_backward(int64_t block, Shape shape);
  // The logits of every position and the loss (with gradients into grad_logits when given).
  BatchResult lm_head_and_loss(Shape shape, float* grad_logits, float grad_scale);
  Shape load_batch(const Batch& batch);

  Gpt2Spec spec_;
  ModelOptions options_;
  const NormOps& norm_;
  const EmbeddingOps& embedding_;
  const AttentionOps& attention_;
  void (*gemm_)(Stream stream, const Gemm& gemm);  // blas.gemm or blas.gemm_bf16

  DeviceBuffer<int32_t> tokens_, targets_;
  std::vector<DeviceBuffer<float>> residuals_;  // [n_layer + 1]: each block's input, then ln_f's
  std::vector<BlockActivations> blocks_;        // one per block, or the shared scratch
  DeviceBuffer<float> ln_f_, ln_f_mean_, ln_f_rstd_, logits_, grad_logits_;
  // Backward scratch: dL/d(residual stream), dL/d(a LayerNorm's output), and dL/d(qkv or c_fc's
  // output), the widest.
  DeviceBuffer<float> grad_residual_, grad_normed_, grad_wide_;
};

std::unique_ptr<Model> make_gpt2(const ModelSpec& spec, const Device& device, const ModelOptions& options);
ModelFootprint gpt2_footprint(const ModelSpec& spec, const ModelOptions& options);

}  // namespace trainctl

// Llama: Hugging Face's LlamaForCausalLM, forward and backward on the device seam. A token
// embedding without positions, n_layer pre-RMSNorm blocks (causal grouped-query attention, each
// key/value head shared by n_head / n_kv_head query heads, with RoPE on the queries and keys; then
// a SwiGLU MLP, down(silu(gate(x)) * up(x))), a final RMSNorm and the LM head, tied to the
// embedding or a tensor of its own; no biases; the loss is token cross-entropy. Parameters are
// named and shaped as in LlamaForCausalLM.state_dict() (nn.Linear weights [out, in]), lm_head.weight
// absent when tied. In that order a block's q_proj, k_proj and v_proj are adjacent in the flat
// buffers, and so are gate_proj and up_proj: one GEMM reads each group as one weight, writing qkv
// (attention's layout) and gate_up (SwiGLU's).
//
// RoPE rotates the halves of each query and key head (rotate_half, Hugging Face's layout of
// q_proj and k_proj) by angles position * inv_freq, inv_freq from rope_theta and, with
// rope_scaling, llama3's rule, each computed in float as transformers computes it; the angles'
// cos and sin are tables of the model (the rope ops, device_ops.def).
//
// With precision bf16, recompute, the residual add fused into the RMSNorm after it and the
// logits' gradient written over them, as GPT-2 (models/gpt2/gpt2.h): the activations and their
// gradients bf16, the residual stream, the RMSNorm statistics, the loss and every parameter
// gradient fp32; recompute keeps each block's input alone and recomputes the block's forward,
// bitwise, before its backward.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "llama_spec.h"
#include "model.h"

namespace trainctl {

// RoPE's inverse frequencies [head_dim / 2], with llama3's scaling where the spec has it, in
// float operation for operation as transformers' _compute_default_rope_parameters and
// _compute_llama3_parameters compute them.
std::vector<float> llama_inverse_frequencies(const LlamaSpec& spec);

class Llama : public LanguageModel {
 public:
  Llama(const LlamaSpec& spec, const Device& device, const ModelOptions& options);
  ~Llama() override;

  // Hugging Face's init (initializer_range 0.02): weights normal(0, 0.02), RMSNorm weights 1;
  // drawn in layout order.
  void init_parameters(uint64_t seed) override;
  void forward_backward_into(const Batch& batch, float grad_scale, BatchResult* totals,
                             const LayerDone& layer_done = {}) override;
  void evaluate_into(const Batch& batch, BatchResult* totals) override;

  int64_t loss_terms_per_example() const override { return spec_.block_size; }
  const char* term_unit() const override { return "tokens"; }
  // 6 N + 12 n_layer n_head head_dim block_size, N the parameters a token's FLOPs touch (all but
  // an untied embedding, which is looked up).
  double training_flops_per_term() const override;

  int64_t vocab_size() const override { return spec_.vocab_size; }
  int64_t context_size() const override { return spec_.block_size; }
  void next_token_logits(const int32_t* tokens, int64_t length, float* logits) override;

  // The device buffers for `options`, allocated (device given) or only counted (null).
  struct Buffers;
  static Buffers plan_buffers(const LlamaSpec& spec, const ModelOptions& options, BufferPlan& plan);

 private:
  // The tensors of one block, in layout order.
  enum BlockTensor { kQProj, kKProj, kVProj, kOProj, kGateProj, kUpProj, kDownProj, kInputNorm, kPostNorm, kBlockTensors };
  struct Shape {
    int64_t batch = 0, seq = 0;
    int64_t rows() const { return batch * seq; }
  };

  const ParameterSlice& slice(int64_t block, BlockTensor tensor) const;
  const float* parameter(int64_t block, BlockTensor tensor) { return weights_of(slice(block, tensor)); }
  // The tensor as the GEMMs read it (the compute copy in bf16).
  ConstTypedPtr compute(int64_t block, BlockTensor tensor) { return compute_weights_of(slice(block, tensor)); }
  float* gradient(int64_t block, BlockTensor tensor) { return gradient_of(slice(block, tensor)); }
  int block_layer(int64_t block) const { return slice(block, kQProj).layer; }
  // The embedding, the final norm, and the LM head (the embedding when tied).
  const ParameterSlice& embedding() const { return parameter_layout().front(); }
  const ParameterSlice& final_norm() const;
  const ParameterSlice& lm_head() const;
  AttentionShape attention_shape(Shape shape) const;

  // C = A op(B) (+ C when accumulate), op(B) = B^T when transpose_b (an nn.Linear's forward),
  // A^T B when transpose_a (its weight gradient).
  void matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, ConstTypedPtr a, ConstTypedPtr b,
              bool accumulate, TypedPtr c);
  // The batch's tokens through every block to the final RMSNorm.
  void forward(Shape shape);
  // Block `block`'s forward from its input; writes the MLP's output (the branch the next RMSNorm
  // adds to the residual stream) when `write_output` (recompute needs only the activations).
  void block_forward(int64_t block, Shape shape, bool write_output);
  // From the residual stream's gradient at the block's output to its input, accumulating the
  // block's parameter gradients.
  void block_backward(int64_t block, Shape shape);
  // The logits of every position and the loss into totals, with the logits' gradient written over
  // them when grad_scale is given.
  void lm_head_and_loss(Shape shape, std::optional<float> grad_scale, BatchResult* totals);
  Shape load_batch(const Batch& batch);

  LlamaSpec spec_;
  ModelOptions options_;
  const NormOps& norm_;
  const EmbeddingOps& embedding_;
  const AttentionOps& attention_;
  const RopeOps& rope_;
  std::unique_ptr<Buffers> buffers_;
};

std::unique_ptr<Model> make_llama(const ModelSpec& spec, const Device& device, const ModelOptions& options);
std::vector<ParameterSlice> llama_parameter_tensors(const ModelSpec& spec);
ModelFootprint llama_footprint(const ModelSpec& spec, const ModelOptions& options);

}  // namespace trainctl

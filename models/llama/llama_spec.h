// [model] kind = "llama": a Llama-3-family decoder's sizes, each key mapped one to one to the
// field of Hugging Face's LlamaConfig named in brackets, and the schema that reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "train_spec.h"

namespace trainctl {

// rope_scaling with rope_type = "llama3", as Llama 3.1 and 3.2 ship it: the rotary frequencies
// of wavelengths above original_max_position_embeddings / low_freq_factor divided by `factor`,
// those below original_max_position_embeddings / high_freq_factor kept, and those between
// interpolated (transformers' _compute_llama3_parameters).
struct Llama3RopeScaling {
  double factor = 0.0;
  double low_freq_factor = 0.0;
  double high_freq_factor = 0.0;
  int64_t original_max_position_embeddings = 0;
};

struct LlamaSpec : ModelConfig {
  int64_t n_layer = 0;            // [num_hidden_layers]
  int64_t n_embd = 0;             // [hidden_size]
  int64_t n_head = 0;             // [num_attention_heads]
  int64_t n_kv_head = 0;          // [num_key_value_heads]: each shared by n_head / n_kv_head query heads
  int64_t head_dim = 0;           // [head_dim]
  int64_t intermediate_size = 0;  // [intermediate_size]: the SwiGLU MLP's width
  int64_t vocab_size = 0;         // [vocab_size]
  int64_t block_size = 0;         // the training context (not max_position_embeddings)
  double rope_theta = 500000.0;   // [rope_theta]
  std::optional<Llama3RopeScaling> rope_scaling;  // [rope_scaling]
  double rms_norm_eps = 1e-5;     // [rms_norm_eps]
  bool tie_embeddings = false;    // [tie_word_embeddings]

  const char* kind() const override { return "llama"; }
  std::string describe() const override;
};

// n_layer, n_embd, n_head, intermediate_size, vocab_size and block_size required; n_kv_head
// (default n_head) dividing n_head; head_dim (default n_embd / n_head, which must then divide)
// even, for RoPE's halves; rope_theta, rope_scaling, rms_norm_eps and tie_embeddings as in
// LlamaSpec.
ModelSpec parse_llama_spec(TableReader& reader);

}  // namespace trainctl

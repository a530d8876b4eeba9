// Llama as a model kind: see llama_kind.h. Its data is llm.c's token shards (language_model.h),
// each holding at least one window of block_size + 1 tokens.
#include "llama_kind.h"

#include "language_model.h"
#include "llama.h"

namespace trainctl {

namespace {

// LlamaConfig's fields for the tensors' LlamaForCausalLM names: each [model] key's counterpart
// (llama_spec.h), the fixed parts of the architecture (SiLU, no biases, no dropout), and
// max_position_embeddings, which trainctl does not have, as the context it trained at.
nlohmann::json llama_hugging_face_config(const ModelSpec& spec) {
  const auto& llama = spec.as<LlamaSpec>();
  nlohmann::json rope_scaling = nullptr;
  if (llama.rope_scaling)
    rope_scaling = {
        {"rope_type", "llama3"},
        {"factor", llama.rope_scaling->factor},
        {"low_freq_factor", llama.rope_scaling->low_freq_factor},
        {"high_freq_factor", llama.rope_scaling->high_freq_factor},
        {"original_max_position_embeddings", llama.rope_scaling->original_max_position_embeddings},
    };
  return {
      {"architectures", nlohmann::json::array({"LlamaForCausalLM"})},
      {"model_type", "llama"},
      {"num_hidden_layers", llama.n_layer},
      {"hidden_size", llama.n_embd},
      {"num_attention_heads", llama.n_head},
      {"num_key_value_heads", llama.n_kv_head},
      {"head_dim", llama.head_dim},
      {"intermediate_size", llama.intermediate_size},
      {"vocab_size", llama.vocab_size},
      {"max_position_embeddings", llama.block_size},
      {"rope_theta", llama.rope_theta},
      {"rope_scaling", rope_scaling},
      {"rms_norm_eps", llama.rms_norm_eps},
      {"tie_word_embeddings", llama.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"attention_dropout", 0.0},
      {"initializer_range", 0.02},
  };
}

}  // namespace

const ModelKind& llama_kind() {
  static const ModelKind kind{
      {"llama", parse_llama_spec},
      {OptionalFamily::norm, OptionalFamily::embedding, OptionalFamily::attention, OptionalFamily::rope},
      make_llama,
      llama_parameter_tensors,
      llama_footprint,
      open_tokens_of<LlamaSpec>,
      check_tokens_of<LlamaSpec>,
      tokens_footprint_of<LlamaSpec>,
      llama_hugging_face_config,
  };
  return kind;
}

}  // namespace trainctl

// Llama as a model kind: see llama_kind.h. Its data is llm.c's token shards (language_model.h),
// each holding at least one window of block_size + 1 tokens.
#include "llama_kind.h"

#include "language_model.h"
#include "llama.h"

namespace trainctl {

namespace {

// LlamaConfig's fields for the tensors' LlamaForCausalLM names: each [model] key's counterpart
// (llama_spec.h), with LlamaConfig's defaults for those a config.json lacks, in transformers 4.x's
// spelling (the Hub's Llama 3 files; config_json.h reads 5's rope_parameters as rope_theta and
// rope_scaling); the fixed parts of the architecture (SiLU, no biases, no dropout); and
// max_position_embeddings, which trainctl does not have, as the context it trained at, not
// compared.
std::vector<ConfigJsonField> llama_config_json(const ModelSpec& spec) {
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
  // Compared after num_attention_heads and hidden_size, so that the defaults derived from them
  // may be taken from the spec.
  const int64_t heads_when_absent = llama.n_head, head_dim_when_absent = llama.n_embd / llama.n_head;
  return {
      {"architectures", nlohmann::json::array({"LlamaForCausalLM"}), "", std::nullopt},
      {"model_type", "llama", "", std::nullopt},
      {"num_hidden_layers", llama.n_layer, "n_layer", 32},
      {"hidden_size", llama.n_embd, "n_embd", 4096},
      {"num_attention_heads", llama.n_head, "n_head", 32},
      {"num_key_value_heads", llama.n_kv_head, "n_kv_head", heads_when_absent},
      {"head_dim", llama.head_dim, "head_dim", head_dim_when_absent},
      {"intermediate_size", llama.intermediate_size, "intermediate_size", 11008},
      {"vocab_size", llama.vocab_size, "vocab_size", 32000},
      {"max_position_embeddings", llama.block_size, "", std::nullopt},
      {"rope_theta", llama.rope_theta, "rope_theta", 10000.0},
      {"rope_scaling", rope_scaling, "rope_scaling", nullptr},
      {"rms_norm_eps", llama.rms_norm_eps, "rms_norm_eps", 1e-6},
      {"tie_word_embeddings", llama.tie_embeddings, "tie_embeddings", false},
      {"hidden_act", "silu", "", std::nullopt},
      {"attention_bias", false, "", std::nullopt},
      {"mlp_bias", false, "", std::nullopt},
      {"attention_dropout", 0.0, "", std::nullopt},
      {"initializer_range", 0.02, "", std::nullopt},
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
      llama_config_json,
  };
  return kind;
}

}  // namespace trainctl

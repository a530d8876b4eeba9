// GPT-2 as a model kind: see gpt2_kind.h. Its data is llm.c's token shards (language_model.h),
// each holding at least one window of block_size + 1 tokens.
#include "gpt2_kind.h"

#include "gpt2.h"
#include "language_model.h"

namespace trainctl {

namespace {

// GPT2Config's fields for the tensors' GPT2LMHeadModel names (the tied lm_head.weight is not
// stored: from_pretrained ties it), with GPT2Config's defaults for the sizes a config.json lacks.
std::vector<ConfigJsonField> gpt2_config_json(const ModelSpec& spec) {
  const auto& gpt2 = spec.as<Gpt2Spec>();
  // GPT-2 has no separate BOS/EOS: its one special token, <|endoftext|>, is the last id.
  const int64_t end_of_text = gpt2.vocab_size - 1;
  return {
      {"architectures", nlohmann::json::array({"GPT2LMHeadModel"}), "", std::nullopt},
      {"model_type", "gpt2", "", std::nullopt},
      {"n_layer", gpt2.n_layer, "n_layer", 12},
      {"n_head", gpt2.n_head, "n_head", 12},
      {"n_embd", gpt2.n_embd, "n_embd", 768},
      // wpe holds a row per position, so the context is a size the tensors depend on.
      {"n_positions", gpt2.block_size, "block_size", 1024},
      {"n_ctx", gpt2.block_size, "", std::nullopt},
      {"vocab_size", gpt2.vocab_size, "vocab_size", 50257},
      {"activation_function", "gelu_new", "", std::nullopt},
      {"layer_norm_epsilon", 1e-5, "", std::nullopt},
      {"resid_pdrop", 0.0, "", std::nullopt},
      {"embd_pdrop", 0.0, "", std::nullopt},
      {"attn_pdrop", 0.0, "", std::nullopt},
      {"tie_word_embeddings", true, "", std::nullopt},
      {"bos_token_id", end_of_text, "", std::nullopt},
      {"eos_token_id", end_of_text, "", std::nullopt},
  };
}

}  // namespace

const ModelKind& gpt2_kind() {
  static const ModelKind kind{
      {"gpt2", parse_gpt2_spec},
      {OptionalFamily::norm, OptionalFamily::embedding, OptionalFamily::attention},
      make_gpt2,
      gpt2_parameter_tensors,
      gpt2_footprint,
      open_tokens_of<Gpt2Spec>,
      check_tokens_of<Gpt2Spec>,
      tokens_footprint_of<Gpt2Spec>,
      gpt2_config_json,
  };
  return kind;
}

}  // namespace trainctl

// GPT-2 as a model kind: see gpt2_kind.h. Its data is llm.c's token shards (language_model.h),
// each holding at least one window of block_size + 1 tokens.
#include "gpt2_kind.h"

#include "gpt2.h"
#include "language_model.h"

namespace trainctl {

namespace {

// GPT2Config's fields for the tensors' GPT2LMHeadModel names (the tied lm_head.weight is not
// stored: from_pretrained ties it).
nlohmann::json hugging_face_config(const ModelSpec& spec) {
  const auto& gpt2 = spec.as<Gpt2Spec>();
  // GPT-2 has no separate BOS/EOS: its one special token, <|endoftext|>, is the last id.
  const int64_t end_of_text = gpt2.vocab_size - 1;
  return {
      {"architectures", nlohmann::json::array({"GPT2LMHeadModel"})},
      {"model_type", "gpt2"},
      {"n_layer", gpt2.n_layer},
      {"n_head", gpt2.n_head},
      {"n_embd", gpt2.n_embd},
      {"n_positions", gpt2.block_size},
      {"n_ctx", gpt2.block_size},
      {"vocab_size", gpt2.vocab_size},
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"tie_word_embeddings", true},
      {"bos_token_id", end_of_text},
      {"eos_token_id", end_of_text},
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
      hugging_face_config,
  };
  return kind;
}

}  // namespace trainctl

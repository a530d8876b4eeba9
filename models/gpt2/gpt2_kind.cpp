// GPT-2 as a model kind: see gpt2_kind.h. Its data is llm.c's token shards (data/token_file.h),
// each holding at least one window of block_size + 1 tokens.
#include "gpt2_kind.h"

#include "gpt2.h"
#include "token_file.h"
#include "token_source.h"

namespace trainctl {

namespace {

std::unique_ptr<BatchSource> open_tokens(const std::string& path, const ModelSpec& spec) {
  const auto& model = spec.as<Gpt2Spec>();
  return std::make_unique<TokenSource>(path, model.block_size, model.vocab_size);
}

// The header of every shard `pattern` names, each checked against the model.
std::vector<TokenFileHeader> checked_token_headers(const std::string& pattern, const ModelSpec& spec) {
  const auto& model = spec.as<Gpt2Spec>();
  std::vector<TokenFileHeader> headers;
  for (const std::string& path : token_file_paths(pattern)) {
    require_regular_file(path);
    headers.push_back(read_token_header(path));
    require_one_window(path, headers.back().count, model.block_size);
  }
  return headers;
}

void check_tokens(const std::string& pattern, const ModelSpec& spec) { checked_token_headers(pattern, spec); }

DataFootprint token_footprint(const std::string& pattern, const ModelSpec& spec) {
  const int64_t block_size = spec.as<Gpt2Spec>().block_size;
  DataFootprint footprint;
  footprint.mapped = true;  // TokenSource maps the shards
  for (const auto [format, count] : checked_token_headers(pattern, spec)) {
    footprint.bytes += count * bytes_per_token(format);
    footprint.examples += (count - 1) / block_size;  // its windows
  }
  return footprint;
}

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
      open_tokens,
      check_tokens,
      token_footprint,
      hugging_face_config,
  };
  return kind;
}

}  // namespace trainctl

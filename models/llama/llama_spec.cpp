// Llama's [model] table: see llama_spec.h.
#include "llama_spec.h"

#include <fmt/format.h>

#include "config_reader.h"

namespace trainctl {

namespace {

// Token ids are int32 in a batch, and a vocabulary of this size is already a 16 GiB embedding at
// n_embd 256: far beyond any Llama's (128,256) or Gemma's (256,000).
constexpr int64_t kMaxVocab = int64_t{1} << 24;
// Llama 3.1's context is 131,072.
constexpr int64_t kMaxBlockSize = int64_t{1} << 17;

// A number that must be above zero (rope_theta, rms_norm_eps, the scaling's factors).
double positive_number(TableReader& reader, std::string_view key, std::optional<double> fallback) {
  const double value = reader.number(key, fallback);
  if (!(value > 0.0)) reader.fail(key, fmt::format("must be above 0 (got {})", value));
  return value;
}

Llama3RopeScaling parse_rope_scaling(TableReader& reader) {
  reader.choice("rope_type", {"llama3"});
  Llama3RopeScaling scaling;
  scaling.factor = reader.number("factor");
  if (!(scaling.factor >= 1.0)) reader.fail("factor", fmt::format("must be at least 1 (got {})", scaling.factor));
  scaling.low_freq_factor = positive_number(reader, "low_freq_factor", std::nullopt);
  scaling.high_freq_factor = positive_number(reader, "high_freq_factor", std::nullopt);
  if (!(scaling.high_freq_factor > scaling.low_freq_factor))
    reader.fail("high_freq_factor", fmt::format("must be above low_freq_factor = {} (got {})",
                                                scaling.low_freq_factor, scaling.high_freq_factor));
  scaling.original_max_position_embeddings = reader.integer("original_max_position_embeddings", std::nullopt, 1);
  reader.reject_unknown();
  return scaling;
}

}  // namespace

std::string LlamaSpec::describe() const {
  return fmt::format("llama {} layers x {} wide, {} heads ({} key/value) of {}, MLP {}, block {}, vocab {}{}{}",
                     n_layer, n_embd, n_head, n_kv_head, head_dim, intermediate_size, block_size, vocab_size,
                     rope_scaling ? fmt::format(", rope scaling x{}", rope_scaling->factor) : "",
                     tie_embeddings ? ", tied" : "");
}

ModelSpec parse_llama_spec(TableReader& reader) {
  LlamaSpec model;
  model.n_layer = reader.integer("n_layer", std::nullopt, 1, 1024);
  model.n_embd = reader.integer("n_embd", std::nullopt, 1, 1 << 16);
  model.n_head = reader.integer("n_head", std::nullopt, 1, 1024);
  model.n_kv_head = reader.integer("n_kv_head", model.n_head, 1, 1024);
  if (model.n_head % model.n_kv_head != 0)
    reader.fail("n_kv_head", fmt::format("{} does not divide n_head = {}: each key/value head serves as many query "
                                         "heads as every other", model.n_kv_head, model.n_head));
  if (reader.has("head_dim")) {
    model.head_dim = reader.integer("head_dim", std::nullopt, 2, 1024);
    if (model.head_dim % 2 != 0)
      reader.fail("head_dim", fmt::format("{} is odd: RoPE rotates the two halves of a head", model.head_dim));
  } else {
    if (model.n_embd % model.n_head != 0)
      reader.fail("n_embd", fmt::format("{} is not divisible by n_head = {} (or set head_dim)", model.n_embd,
                                        model.n_head));
    model.head_dim = model.n_embd / model.n_head;
    if (model.head_dim % 2 != 0)
      reader.fail("n_embd", fmt::format("n_embd / n_head = {} is odd: RoPE rotates the two halves of a head",
                                        model.head_dim));
  }
  model.intermediate_size = reader.integer("intermediate_size", std::nullopt, 1, 1 << 20);
  model.vocab_size = reader.integer("vocab_size", std::nullopt, 2, kMaxVocab);
  model.block_size = reader.integer("block_size", std::nullopt, 1, kMaxBlockSize);
  model.rope_theta = positive_number(reader, "rope_theta", model.rope_theta);
  if (TableReader scaling = reader.table("rope_scaling"); scaling.present())
    model.rope_scaling = parse_rope_scaling(scaling);
  model.rms_norm_eps = positive_number(reader, "rms_norm_eps", model.rms_norm_eps);
  model.tie_embeddings = reader.boolean("tie_embeddings", model.tie_embeddings);
  return model;
}

}  // namespace trainctl

// GPT-2's [model] table: see gpt2_spec.h.
#include "gpt2_spec.h"

#include <fmt/format.h>

#include "config_reader.h"

namespace trainctl {

std::string Gpt2Spec::describe() const {
  return fmt::format("gpt2 {} layers x {} wide, {} heads, block {}, vocab {}", n_layer, n_embd, n_head, block_size,
                     vocab_size);
}

ModelSpec parse_gpt2_spec(TableReader& reader) {
  Gpt2Spec model;
  model.n_layer = reader.integer("n_layer", std::nullopt, 1, 1024);
  model.n_head = reader.integer("n_head", std::nullopt, 1, 1024);
  model.n_embd = reader.integer("n_embd", std::nullopt, 1, 1 << 16);
  model.block_size = reader.integer("block_size", std::nullopt, 1, 1 << 16);
  // Tokens are stored as uint16.
  model.vocab_size = reader.integer("vocab_size", std::nullopt, 2, 65536);
  if (model.n_embd % model.n_head != 0)
    reader.fail("n_embd", fmt::format("{} is not divisible by n_head = {}", model.n_embd, model.n_head));
  return model;
}

}  // namespace trainctl

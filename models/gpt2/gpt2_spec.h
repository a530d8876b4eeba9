// [model] kind = "gpt2": the GPT-2 decoder's sizes (Hugging Face's GPT2Config names in brackets),
// and the schema that reads them from a config.
#pragma once

#include <cstdint>
#include <string>

#include "train_spec.h"

namespace trainctl {

struct Gpt2Spec : ModelConfig {
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_embd = 0;
  int64_t block_size = 0;  // context length [n_positions]
  int64_t vocab_size = 0;

  const char* kind() const override { return "gpt2"; }
  std::string describe() const override;
};

// n_layer, n_head, n_embd, block_size and vocab_size, all required; n_embd a multiple of n_head.
ModelSpec parse_gpt2_spec(TableReader& reader);

}  // namespace trainctl

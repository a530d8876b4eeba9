// model.kind = "gpt2" as the registry lists it: a language model over llm.c token shards, exported
// as Hugging Face's GPT2LMHeadModel.
#pragma once

#include "model_kind.h"

namespace trainctl {

const ModelKind& gpt2_kind();

}  // namespace trainctl

// model.kind = "llama" as the registry lists it: a language model over llm.c token shards,
// exported as Hugging Face's LlamaForCausalLM.
#pragma once

#include "model_kind.h"

namespace trainctl {

const ModelKind& llama_kind();

}  // namespace trainctl

// The model kinds of trainctl: the list the CLI and the runtime link (registry.h). The first is
// the default model.kind.
#include "gpt2/gpt2_kind.h"
#include "llama/llama_kind.h"
#include "mlp/mlp_kind.h"
#include "registry.h"

namespace trainctl {

std::span<const ModelKind* const> model_kinds() {
  static const ModelKind* const kinds[] = {&mlp_kind(), &gpt2_kind(), &llama_kind()};
  return kinds;
}

}  // namespace trainctl

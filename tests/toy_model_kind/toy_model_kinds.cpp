// The test build's list of model kinds (registry.h): trainctl's, then the toy kind of this folder.
#include "gpt2/gpt2_kind.h"
#include "mlp/mlp_kind.h"
#include "registry.h"
#include "toy_kind.h"

namespace trainctl {

std::span<const ModelKind* const> model_kinds() {
  static const ModelKind* const kinds[] = {&mlp_kind(), &gpt2_kind(), &toy::toy_kind()};
  return kinds;
}

}  // namespace trainctl

// The activation names: see activation.h.
#include "activation.h"

namespace trainctl {

const char* activation_name(Activation activation) {
  switch (activation) {
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
    default: return "none";
  }
}

}  // namespace trainctl

// The activation functions trainctl computes, named once for the config schema ([model]
// activation) and for the device seam's fused bias+activation ops.
#pragma once

namespace trainctl {

// kGelu is the exact erf form (torch.nn.GELU()); kGeluTanh is GPT-2's tanh approximation
// (torch.nn.GELU(approximate="tanh")).
enum class Activation { kNone, kRelu, kGelu, kGeluTanh };

const char* activation_name(Activation activation);

}  // namespace trainctl

// Named tensors (a checkpoint's, a safetensors file's) matched to a model's parameters as
// parameter_layout() lays them out in the flat buffer: which tensor is which parameter, by name
// and shape, and the flat buffer they fill, padding included. The rules of a fit and the words of
// a mismatch are written here once, for resume, train.init_from, `trainctl sample` and
// `trainctl export`.
#pragma once

#include <string>
#include <vector>

#include "checkpoint.h"
#include "model.h"

namespace trainctl {

enum class TensorMatch {
  // A trainctl checkpoint of the model: exactly the layout's tensors, in its order.
  kCheckpoint,
  // Weights published elsewhere (train.init_from): each parameter by its name or, as the Hugging
  // Face Hub stores a head model's base model, by its name without "transformer.", in any order.
  // Tensors stored beside the parameters (GPT-2's causal-mask buffers, the LM head tied to wte)
  // are passed over; any other tensor the model has no place for is refused.
  kPretrained,
};

// The tensor of each parameter, in layout order. With `optimizer_state`, the tensors matched are
// that state's, "<parameter>/<state>", among a checkpoint's optimizer state. Throws BadInput
// naming `source` ("checkpoint PATH", "train.init_from: PATH") and the first tensor that does not
// fit: missing, shaped otherwise, out of order (kCheckpoint) or with no place in the model.
std::vector<const Tensor*> match_tensors(const std::vector<Tensor>& tensors, const std::vector<ParameterSlice>& layout,
                                         TensorMatch match, const std::string& source,
                                         const std::string& optimizer_state = "");

// The flat buffer the matched tensors fill, the padding after a tensor zero: what a model's
// parameters() (or an optimizer state's buffer) is loaded from.
std::vector<float> flatten_tensors(const std::vector<Tensor>& tensors, const std::vector<ParameterSlice>& layout,
                                   TensorMatch match, const std::string& source,
                                   const std::string& optimizer_state = "");

}  // namespace trainctl

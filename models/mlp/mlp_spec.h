// [model] kind = "mlp": the classifier torch.nn.Sequential(Linear, Act, ..., Linear)'s widths and
// activation, and the schema that reads them from a config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "activation.h"
#include "train_spec.h"

namespace trainctl {

struct MlpSpec : ModelConfig {
  int64_t inputs = 0;
  std::vector<int64_t> hidden;
  int64_t classes = 0;
  Activation activation = Activation::kRelu;

  // The widths of the activations: inputs, each hidden layer's, classes.
  std::vector<int64_t> widths() const;

  const char* kind() const override { return "mlp"; }
  std::string describe() const override;  // "mlp 32-64-4": the widths
};

// inputs and classes required; hidden (default none) and activation (relu or gelu, default relu).
ModelSpec parse_mlp_spec(TableReader& reader);

}  // namespace trainctl

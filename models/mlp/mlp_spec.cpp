// The MLP's [model] table: see mlp_spec.h.
#include "mlp_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config_reader.h"

namespace trainctl {

namespace {

// Far beyond any real layer, so that no product of widths can overflow.
constexpr int64_t kMaxWidth = 1 << 20;

}  // namespace

std::vector<int64_t> MlpSpec::widths() const {
  std::vector<int64_t> widths{inputs};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(classes);
  return widths;
}

std::string MlpSpec::describe() const { return fmt::format("mlp {}", fmt::join(widths(), "-")); }

ModelSpec parse_mlp_spec(TableReader& reader) {
  MlpSpec model;
  model.inputs = reader.integer("inputs", std::nullopt, 1, kMaxWidth);
  model.hidden = reader.integer_list("hidden", std::vector<int64_t>{}, 1, kMaxWidth);
  model.classes = reader.integer("classes", std::nullopt, 2, kMaxWidth);
  std::string activation = reader.choice("activation", {"relu", "gelu"}, "relu");
  model.activation = activation == "relu" ? Activation::kRelu : Activation::kGelu;
  return model;
}

}  // namespace trainctl

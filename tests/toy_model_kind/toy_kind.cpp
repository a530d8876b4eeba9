// The toy model kind: see toy_kind.h.
#include "toy_kind.h"

#include <fmt/format.h>

#include "config_reader.h"
#include "mlp/mlp.h"
#include "mlp/mlp_kind.h"

namespace trainctl::toy {

namespace {

struct ToySpec : ModelConfig {
  int64_t features = 0;
  int64_t classes = 0;

  const char* kind() const override { return "toy"; }
  std::string describe() const override { return fmt::format("toy linear {} -> {}", features, classes); }
};

ModelSpec parse_toy(TableReader& reader) {
  ToySpec toy;
  toy.features = reader.integer("features", std::nullopt, 1, 4096);
  toy.classes = reader.integer("classes", std::nullopt, 2, 4096);
  return toy;
}

// The model as the MLP kind sees it: no hidden layer.
ModelSpec as_mlp(const ModelSpec& spec) {
  const auto& toy = spec.as<ToySpec>();
  MlpSpec mlp;
  mlp.inputs = toy.features;
  mlp.classes = toy.classes;
  return mlp;
}

std::unique_ptr<Model> build(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  return std::make_unique<Mlp>(as_mlp(spec).as<MlpSpec>(), device, options);
}

std::vector<ParameterSlice> parameter_tensors(const ModelSpec& spec) {
  return mlp_kind().parameter_tensors(as_mlp(spec));
}

ModelFootprint footprint(const ModelSpec& spec, const ModelOptions& options) {
  return mlp_kind().footprint(as_mlp(spec), options);
}

std::unique_ptr<BatchSource> open_data(const std::string& path, const ModelSpec& spec) {
  return mlp_kind().open_data(path, as_mlp(spec));
}

void check_data(const std::string& path, const ModelSpec& spec) { mlp_kind().check_data(path, as_mlp(spec)); }

DataFootprint data_footprint(const std::string& path, const ModelSpec& spec) {
  return mlp_kind().data_footprint(path, as_mlp(spec));
}

std::vector<ConfigJsonField> config_json(const ModelSpec& spec) {
  const auto& toy = spec.as<ToySpec>();
  return {{"model_type", "trainctl-toy", "", std::nullopt},
          {"features", toy.features, "features", std::nullopt},
          {"classes", toy.classes, "classes", std::nullopt}};
}

}  // namespace

const ModelKind& toy_kind() {
  static const ModelKind kind{
      {"toy", parse_toy}, {}, build, parameter_tensors, footprint, open_data, check_data, data_footprint,
      config_json,
  };
  return kind;
}

}  // namespace trainctl::toy

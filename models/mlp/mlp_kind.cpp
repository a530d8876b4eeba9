// The MLP as a model kind: see mlp_kind.h. Its data is the classification HDF5 file
// (data/classification_file.h): x float32 [samples, inputs], y int [samples] in [0, classes).
#include "mlp_kind.h"

#include <fmt/format.h>

#include "classification_file.h"
#include "mlp.h"

namespace trainctl {

namespace {

void require_features(const std::string& path, int64_t features, const MlpSpec& model) {
  if (features != model.inputs)
    throw DataError(fmt::format("{} has {} features per sample but model.inputs = {}", path, features, model.inputs));
}

ClassificationShape checked_classification_shape(const std::string& path, const ModelSpec& spec) {
  require_regular_file(path);
  ClassificationShape shape;
  try {
    shape = read_classification_shape(path);
  } catch (const std::runtime_error& error) {
    throw DataError(error.what());
  }
  require_features(path, shape.features, spec.as<MlpSpec>());
  return shape;
}

void check_classification(const std::string& path, const ModelSpec& spec) { checked_classification_shape(path, spec); }

DataFootprint classification_footprint(const std::string& path, const ModelSpec& spec) {
  const ClassificationShape shape = checked_classification_shape(path, spec);
  // ClassificationData: x float32 [samples, features], y int32 [samples].
  const auto bytes_per_sample = static_cast<int64_t>(shape.features * sizeof(float) + sizeof(int32_t));
  return {shape.samples * bytes_per_sample, shape.samples};
}

std::unique_ptr<BatchSource> open_classification(const std::string& path, const ModelSpec& spec) {
  const auto& model = spec.as<MlpSpec>();
  auto source = std::make_unique<ClassificationSource>(path);
  const ClassificationData& data = source->data();
  require_features(path, data.features, model);
  for (int32_t label : data.y)
    if (label < 0 || label >= model.classes)
      throw DataError(fmt::format("{} has label {}, outside [0, model.classes = {})", path, label, model.classes));
  return source;
}

// trainctl's own fields (no transformers class has this model), [model]'s keys, with its defaults.
std::vector<ConfigJsonField> own_config_json(const ModelSpec& spec) {
  const auto& mlp = spec.as<MlpSpec>();
  return {{"model_type", "trainctl-mlp", "", std::nullopt},
          {"inputs", mlp.inputs, "inputs", std::nullopt},
          {"hidden", mlp.hidden, "hidden", nlohmann::json::array()},
          {"classes", mlp.classes, "classes", std::nullopt},
          {"activation", activation_name(mlp.activation), "activation", activation_name(Activation::kRelu)}};
}

}  // namespace

const ModelKind& mlp_kind() {
  static const ModelKind kind{
      {"mlp", parse_mlp_spec}, {}, make_mlp, mlp_parameter_tensors, mlp_footprint, open_classification,
      check_classification, classification_footprint, own_config_json,
  };
  return kind;
}

}  // namespace trainctl

// The model registry: see registry.h.
#include "registry.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace trainctl {

std::span<const ModelSchema> model_schemas() {
  static const std::vector<ModelSchema> schemas = [] {
    std::vector<ModelSchema> list;
    for (const ModelKind* kind : model_kinds()) list.push_back(kind->schema);
    return list;
  }();
  return schemas;
}

RunSpec parse_run_spec(const toml::table& root, const std::string& file) {
  return parse_run_spec(root, file, model_schemas());
}

const ModelKind& model_kind(const ModelSpec& spec) {
  for (const ModelKind* kind : model_kinds())
    if (std::string_view(kind->schema.kind) == spec.kind()) return *kind;
  throw std::logic_error(fmt::format("model kind {} is parsed but not registered", spec.kind()));
}

void require_op_families(const ModelSpec& spec, const Device& device) {
  const ModelKind& kind = model_kind(spec);
  std::vector<std::string> missing;
  for (OptionalFamily family : missing_families(device, kind.needs)) missing.emplace_back(optional_family_name(family));
  if (!missing.empty())
    throw ModelInputError(fmt::format("model.kind = \"{}\" needs the {} ops, which device \"{}\" does not have yet",
                                      kind.schema.kind, fmt::join(missing, ", "), device.name));
}

std::vector<ParameterSlice> parameter_layout(const ModelSpec& spec) {
  return laid_out(model_kind(spec).parameter_tensors(spec));
}

std::unique_ptr<Model> build_model(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  require_op_families(spec, device);
  return model_kind(spec).build(spec, device, options);
}

std::unique_ptr<BatchSource> open_model_data(const ModelSpec& spec, const char* key, const std::string& path) {
  try {
    return model_kind(spec).open_data(path, spec);
  } catch (const BadInput& error) {
    throw BadInput(fmt::format("data.{}: {}", key, error.what()));
  }
}

}  // namespace trainctl

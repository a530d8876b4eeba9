// The model registry: see registry.h. Adding a model kind is one row of kModelKinds, beside
// its [model] schema in common/train_spec.cpp.
#include "registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "classification_file.h"
#include "gpt2.h"
#include "mlp.h"
#include "token_source.h"

namespace trainctl {

namespace {

std::unique_ptr<BatchSource> open_classification(const std::string& path, const ModelSpec& spec) {
  const auto& model = std::get<MlpSpec>(spec.config);
  auto source = std::make_unique<ClassificationSource>(path);
  const ClassificationData& data = source->data();
  if (data.features != model.inputs)
    throw DataError(
        fmt::format("{} has {} features per sample but model.inputs = {}", path, data.features, model.inputs));
  for (int32_t label : data.y)
    if (label < 0 || label >= model.classes)
      throw DataError(fmt::format("{} has label {}, outside [0, model.classes = {})", path, label, model.classes));
  return source;
}

std::unique_ptr<BatchSource> open_tokens(const std::string& path, const ModelSpec& spec) {
  const auto& model = std::get<Gpt2Spec>(spec.config);
  return std::make_unique<TokenSource>(path, model.block_size, model.vocab_size);
}

const ModelKind kModelKinds[] = {
    {"mlp", {}, make_mlp, open_classification},
    {"gpt2", {OpFamily::kNorm, OpFamily::kEmbedding, OpFamily::kAttention}, make_gpt2, open_tokens},
};

}  // namespace

const ModelKind& model_kind(const ModelSpec& spec) {
  for (const ModelKind& kind : kModelKinds)
    if (std::string_view(kind.name) == spec.kind()) return kind;
  throw std::logic_error(fmt::format("model kind {} is parsed but not registered", spec.kind()));
}

void require_op_families(const ModelSpec& spec, const Device& device) {
  const ModelKind& kind = model_kind(spec);
  std::vector<std::string> missing;
  for (OpFamily family : missing_families(device, kind.needs)) missing.emplace_back(op_family_name(family));
  if (!missing.empty())
    throw ModelInputError(fmt::format("model.kind = \"{}\" needs the {} ops, which device \"{}\" does not have yet",
                                      kind.name, fmt::join(missing, ", "), device.name));
}

std::unique_ptr<Model> build_model(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  require_op_families(spec, device);
  return model_kind(spec).build(spec, device, options);
}

}  // namespace trainctl

// The model registry: see registry.h. Adding a model kind is one row of kModelKinds, beside
// its [model] schema in common/train_spec.cpp.
#include "registry.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "classification_file.h"
#include "gpt2.h"
#include "mlp.h"
#include "token_file.h"
#include "token_source.h"

namespace trainctl {

namespace {

// Refuses what is not a regular file before any reader opens it: a FIFO would block the reader.
void require_regular_file(const std::string& path) {
  struct stat status {};
  if (stat(path.c_str(), &status) != 0) throw DataError(fmt::format("{}: {}", path, std::strerror(errno)));
  if (S_ISDIR(status.st_mode)) throw DataError(fmt::format("{}: is a directory, not a data file", path));
  if (!S_ISREG(status.st_mode)) throw DataError(fmt::format("{}: is not a regular file", path));
}

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
  require_features(path, shape.features, std::get<MlpSpec>(spec.config));
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
  const auto& model = std::get<MlpSpec>(spec.config);
  auto source = std::make_unique<ClassificationSource>(path);
  const ClassificationData& data = source->data();
  require_features(path, data.features, model);
  for (int32_t label : data.y)
    if (label < 0 || label >= model.classes)
      throw DataError(fmt::format("{} has label {}, outside [0, model.classes = {})", path, label, model.classes));
  return source;
}

std::unique_ptr<BatchSource> open_tokens(const std::string& path, const ModelSpec& spec) {
  const auto& model = std::get<Gpt2Spec>(spec.config);
  return std::make_unique<TokenSource>(path, model.block_size, model.vocab_size);
}

// The token count of every shard `pattern` names, each checked against the model.
std::vector<int64_t> checked_token_counts(const std::string& pattern, const ModelSpec& spec) {
  const auto& model = std::get<Gpt2Spec>(spec.config);
  std::vector<int64_t> counts;
  for (const std::string& path : token_file_paths(pattern)) {
    require_regular_file(path);
    counts.push_back(read_token_count(path));
    require_one_window(path, counts.back(), model.block_size);
  }
  return counts;
}

void check_tokens(const std::string& pattern, const ModelSpec& spec) { checked_token_counts(pattern, spec); }

DataFootprint token_footprint(const std::string& pattern, const ModelSpec& spec) {
  const int64_t block_size = std::get<Gpt2Spec>(spec.config).block_size;
  DataFootprint footprint;
  footprint.mapped = true;  // TokenSource maps the shards
  for (int64_t count : checked_token_counts(pattern, spec)) {
    footprint.bytes += count * static_cast<int64_t>(sizeof(uint16_t));
    footprint.examples += (count - 1) / block_size;                      // its windows
  }
  return footprint;
}

const ModelKind kModelKinds[] = {
    {"mlp", {}, make_mlp, mlp_parameter_tensors, mlp_footprint, open_classification, check_classification,
     classification_footprint},
    {"gpt2", {OptionalFamily::norm, OptionalFamily::embedding, OptionalFamily::attention}, make_gpt2,
     gpt2_parameter_tensors, gpt2_footprint, open_tokens, check_tokens, token_footprint},
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
  for (OptionalFamily family : missing_families(device, kind.needs)) missing.emplace_back(optional_family_name(family));
  if (!missing.empty())
    throw ModelInputError(fmt::format("model.kind = \"{}\" needs the {} ops, which device \"{}\" does not have yet",
                                      kind.name, fmt::join(missing, ", "), device.name));
}

std::vector<ParameterSlice> parameter_layout(const ModelSpec& spec) {
  return laid_out(model_kind(spec).parameter_tensors(spec));
}

std::unique_ptr<Model> build_model(const ModelSpec& spec, const Device& device, const ModelOptions& options) {
  require_op_families(spec, device);
  return model_kind(spec).build(spec, device, options);
}

}  // namespace trainctl

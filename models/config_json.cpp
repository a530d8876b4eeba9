// A model's config.json: see config_json.h.
#include "config_json.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "bad_input.h"
#include "registry.h"

namespace trainctl {

nlohmann::json exported_config_json(const ModelSpec& spec, const std::string& torch_dtype) {
  nlohmann::json config = nlohmann::json::object();
  for (const ConfigJsonField& field : model_kind(spec).config_json(spec)) config[field.name] = field.value;
  config["torch_dtype"] = torch_dtype;
  return config;
}

void check_init_from_config(const std::string& init_from, const ModelSpec& spec) {
  std::error_code ignored;
  const std::string path = (std::filesystem::path(init_from) / "config.json").string();
  if (!std::filesystem::is_directory(init_from, ignored) || !std::filesystem::exists(path, ignored)) return;
  std::ifstream in(path);
  if (!in) throw BadInput(fmt::format("train.init_from: cannot read {}: {}", path, std::strerror(errno)));
  const nlohmann::json config = nlohmann::json::parse(std::istreambuf_iterator<char>(in), {}, nullptr, false);
  if (!config.is_object()) throw BadInput(fmt::format("train.init_from: {} is not a JSON object", path));
  for (const ConfigJsonField& field : model_kind(spec).config_json(spec)) {
    if (field.model_key.empty()) continue;
    // A null stands for the default, as transformers' configs read their arguments: rope_scaling
    // null is no scaling, as an absent one is.
    const auto stated = config.find(field.name);
    const bool absent = stated == config.end() || stated->is_null();
    // nlohmann::json compares numbers by value across its integer and float kinds: 500000 is 5e5.
    if (absent ? field.when_absent == field.value : *stated == field.value) continue;
    const std::string model_value = fmt::format("the config's model.{} is {}", field.model_key, field.value.dump());
    if (!absent)
      throw BadInput(fmt::format("train.init_from: {}: {} is {} but {}", path, field.name, stated->dump(), model_value));
    if (field.when_absent)
      throw BadInput(fmt::format("train.init_from: {}: {} is {}, which means {}, but {}", path, field.name,
                                 stated == config.end() ? "absent" : "null", field.when_absent->dump(), model_value));
    throw BadInput(fmt::format("train.init_from: {} has no {}, but {}", path, field.name, model_value));
  }
}

}  // namespace trainctl

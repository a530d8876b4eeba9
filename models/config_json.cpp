// A model's config.json: see config_json.h.
#include "config_json.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "bad_input.h"
#include "registry.h"

namespace trainctl {

namespace {

// A config.json's fields in transformers 4.x's spelling, and how the file spells those it moved.
struct ReadConfig {
  nlohmann::json fields;
  std::map<std::string, std::string> spelled;  // a 4.x field's name: the file's

  std::string name_of(const std::string& field) const {
    const auto moved = spelled.find(field);
    return moved == spelled.end() ? field : moved->second;
  }
};

// transformers 5 writes a RoPE model's rotary settings as one object, rope_parameters
// ({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, ...}, or {"rope_type": "default",
// "rope_theta": 10000.0}), where 4.x wrote rope_theta and rope_scaling. Read as 5 reads a file
// (convert_rope_params_to_dict): a rope_scaling stands over rope_parameters; rope_parameters'
// rope_theta over one beside it; the rest of it, unless only the default type, is the scaling.
ReadConfig read_as_transformers_4(nlohmann::json config) {
  ReadConfig read;
  const auto parameters = config.find("rope_parameters");
  const auto scaling = config.find("rope_scaling");
  if (parameters != config.end() && parameters->is_object() && (scaling == config.end() || scaling->is_null())) {
    nlohmann::json rope = *parameters;
    if (rope.contains("rope_theta")) {
      config["rope_theta"] = rope["rope_theta"];
      read.spelled["rope_theta"] = "rope_parameters.rope_theta";
      rope.erase("rope_theta");
    }
    // "type" is the older spelling of rope_type, which transformers still reads.
    const nlohmann::json type = rope.value("rope_type", rope.value("type", nlohmann::json("default")));
    rope.erase("type");
    rope["rope_type"] = type;
    config["rope_scaling"] = type == "default" && rope.size() == 1 ? nlohmann::json(nullptr) : rope;
    read.spelled["rope_scaling"] = "rope_parameters (its scaling)";
  }
  read.fields = std::move(config);
  return read;
}

}  // namespace

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
  const nlohmann::json file = nlohmann::json::parse(std::istreambuf_iterator<char>(in), {}, nullptr, false);
  if (!file.is_object()) throw BadInput(fmt::format("train.init_from: {} is not a JSON object", path));
  const ReadConfig read = read_as_transformers_4(file);
  const nlohmann::json& config = read.fields;
  for (const ConfigJsonField& field : model_kind(spec).config_json(spec)) {
    if (field.model_key.empty()) continue;
    // A null stands for the default, as transformers' configs read their arguments: rope_scaling
    // null is no scaling, as an absent one is.
    const auto stated = config.find(field.name);
    const bool absent = stated == config.end() || stated->is_null();
    // nlohmann::json compares numbers by value across its integer and float kinds: 500000 is 5e5.
    if (absent ? field.when_absent == field.value : *stated == field.value) continue;
    const std::string name = read.name_of(field.name);
    const std::string model_value = fmt::format("the config's model.{} is {}", field.model_key, field.value.dump());
    if (!absent)
      throw BadInput(fmt::format("train.init_from: {}: {} is {} but {}", path, name, stated->dump(), model_value));
    if (field.when_absent)
      throw BadInput(fmt::format("train.init_from: {}: {} is {}, which means {}, but {}", path, name,
                                 stated == config.end() ? "absent" : "null", field.when_absent->dump(), model_value));
    throw BadInput(fmt::format("train.init_from: {} has no {}, but {}", path, name, model_value));
  }
}

}  // namespace trainctl

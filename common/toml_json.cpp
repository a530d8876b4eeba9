// TOML values as JSON: see toml_json.h.
#include "toml_json.h"

#include <sstream>

namespace trainctl {

Json json_of(const toml::node& value) {
  if (const toml::array* array = value.as_array()) {
    Json items = Json::array();
    for (const toml::node& item : *array) items.push_back(json_of(item));
    return items;
  }
  if (const toml::table* table = value.as_table()) {
    Json object = Json::object();
    for (const auto& [key, node] : *table) object[std::string(key.str())] = json_of(node);
    return object;
  }
  if (auto integer = value.value_exact<int64_t>()) return *integer;
  if (auto number = value.value_exact<double>()) return *number;
  if (auto text = value.value_exact<std::string>()) return *text;
  if (auto flag = value.value_exact<bool>()) return *flag;
  std::ostringstream text;
  value.visit([&](const auto& typed) { text << typed; });
  return text.str();
}

}  // namespace trainctl

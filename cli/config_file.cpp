// A whole trainctl config: see config_file.h.
#include "config_file.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "config_reader.h"
#include "errors.h"

namespace trainctl {

namespace {
const std::vector<std::string> kTopLevelTables{"job", "model", "data", "train", "checkpoint", "sweep"};

// The first (in file order) top-level entry that is not one of the known tables.
void reject_unknown_tables(const toml::table& table, const std::string& path) {
  const toml::node* first = nullptr;
  std::string first_name;
  for (const auto& [name, node] : table) {
    const std::string key(name.str());
    if (std::find(kTopLevelTables.begin(), kTopLevelTables.end(), key) != kTopLevelTables.end()) continue;
    if (first == nullptr || node.source().begin < first->source().begin) {
      first = &node;
      first_name = key;
    }
  }
  if (first == nullptr) return;
  std::string message = first->is_table() ? "unknown table" : "unknown top-level key (keys belong in a table)";
  if (auto suggestion = nearest_key(first_name, kTopLevelTables)) message += fmt::format(" (did you mean [{}]?)", *suggestion);
  throw ConfigError(position_of(*first, path), first_name, message);
}
}  // namespace

Config load_config(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw UsageError(fmt::format("config {} does not exist", path));
  Config config;
  config.path = path;
  config.table = parse_config_file(path);
  reject_unknown_tables(config.table, path);
  config.job = parse_job_spec(config.table, path);
  config.run = parse_run_spec(config.table, path);
  config.sweep = parse_sweep(config.table, path, [&](const toml::table& table) { check_config_table(table, path); });
  return config;
}

void check_config_table(const toml::table& table, const std::string& file) {
  parse_job_spec(table, file);
  parse_run_spec(table, file);
}

std::string resolved_config_text(const toml::table& table, const std::string& config_path, const std::string& note) {
  toml::table resolved = table;
  resolve_data_paths(resolved, std::filesystem::path(config_path).parent_path().string());
  std::ostringstream text;
  text << "# resolved by trainctl " << TRAINCTL_VERSION << " from " << std::filesystem::absolute(config_path).string()
       << "\n";
  if (!note.empty()) text << "# " << note << "\n";
  text << resolved << "\n";
  return text.str();
}

}  // namespace trainctl

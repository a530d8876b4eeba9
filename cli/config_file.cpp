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
const std::vector<std::string> kTopLevelTables{"job", "model", "data", "train", "checkpoint"};

void reject_unknown_tables(const toml::table& table, const std::string& path) {
  for (const auto& [name, node] : table) {
    if (std::find(kTopLevelTables.begin(), kTopLevelTables.end(), std::string(name.str())) != kTopLevelTables.end()) continue;
    std::string message = "unknown table";
    if (auto suggestion = nearest_key(name.str(), kTopLevelTables)) message += fmt::format(" (did you mean [{}]?)", *suggestion);
    throw ConfigError(position_of(node, path), std::string(name.str()), message);
  }
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
  return config;
}

std::string resolved_config_text(const Config& config) {
  toml::table resolved = config.table;
  resolve_data_paths(resolved, std::filesystem::path(config.path).parent_path().string());
  std::ostringstream text;
  text << "# resolved by trainctl " << TRAINCTL_VERSION << " from " << std::filesystem::absolute(config.path).string()
       << "\n"
       << resolved << "\n";
  return text.str();
}

}  // namespace trainctl

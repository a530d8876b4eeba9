// Preflight of a config's data files: see preflight.h.
#include "preflight.h"

#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "registry.h"

namespace trainctl {

namespace {

// What has been checked: a model table as text, then a resolved data path.
using CheckedData = std::set<std::string>;

void check_run_data(toml::table table, const std::string& config_path, CheckedData& checked) {
  resolve_data_paths(table, std::filesystem::absolute(config_path).parent_path().string());
  const RunSpec run = parse_run_spec(table, config_path);
  std::ostringstream model;
  model << *table["model"].as_table();
  const ModelKind& kind = model_kind(run.model);
  const auto check = [&](const char* key, const std::string& path) {
    if (!checked.insert(model.str() + "\n" + path).second) return;
    try {
      kind.check_data(path, run.model);
    } catch (const DataError& error) {
      throw BadInput(fmt::format("data.{}: {}", key, error.what()));
    }
  };
  check("train", run.data.train);
  if (run.data.val) check("val", *run.data.val);
}

bool varies_model_or_data(const SweepSpec& sweep) {
  for (const std::string& path : sweep.paths())
    if (path.starts_with("model.") || path.starts_with("data.")) return true;
  return false;
}

}  // namespace

void preflight_data(const Config& config) {
  if (config.program) {
    // The program and its files are the user's; only where it runs can be checked here.
    toml::table resolved = config.table;
    resolve_program_workdir(resolved, std::filesystem::absolute(config.path).parent_path().string());
    const std::string workdir = resolved["program"]["workdir"].value_or(std::string());
    if (!std::filesystem::is_directory(workdir))
      throw BadInput(fmt::format("program.workdir: {} is not a directory", workdir));
    return;
  }
  CheckedData checked;
  if (!config.sweep || !varies_model_or_data(*config.sweep)) {
    check_run_data(config.table, config.path, checked);
    return;
  }
  const std::vector<std::string> paths = config.sweep->paths();
  for (const SweepTask& task : expand_sweep(*config.sweep))
    check_run_data(task_config(config.table, paths, task.values), config.path, checked);
}

std::shared_ptr<bool> add_no_preflight_flag(CLI::App& command) {
  auto skip = std::make_shared<bool>(false);
  command.add_flag("--no-preflight", *skip,
                   "do not check the data files here (for files that only the compute nodes can see)");
  return skip;
}

}  // namespace trainctl

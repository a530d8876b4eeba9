// Preflight of a config's data files: see preflight.h.
#include "preflight.h"

#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "config_json.h"
#include "registry.h"
#include "token_file.h"
#include "tokenizer.h"

namespace trainctl {

namespace {

// What has been checked: a model table as text, then a resolved data path; or a program's workdir.
using CheckedData = std::set<std::string>;

// data.tokenizer: it loads, its vocabulary fits model.vocab_size (a language model's), and the
// token files are in the format its vocabulary is written in (token_format_for).
void check_tokenizer(const toml::table& table, const std::string& path, const RunSpec& run) {
  const Tokenizer tokenizer = [&] {
    try {
      return Tokenizer::load(path);
    } catch (const BadInput& error) {
      throw BadInput(fmt::format("data.tokenizer: {}", error.what()));
    }
  }();
  const std::optional<int64_t> vocab_size = table["model"]["vocab_size"].value<int64_t>();
  if (!vocab_size) return;  // not a language model: the runtime refuses a tokenizer for it
  if (tokenizer.vocab_size() > *vocab_size)
    throw BadInput(fmt::format("data.tokenizer: {} has {} tokens, more than model.vocab_size = {}", path,
                               tokenizer.vocab_size(), *vocab_size));
  const TokenFormat format = token_format_for(tokenizer.vocab_size());
  const auto check_format = [&](const char* key, const std::string& pattern) {
    for (const std::string& file : token_file_paths(pattern)) {
      const TokenFormat found = read_token_header(file).format;
      if (found != format)
        throw BadInput(fmt::format("data.{}: {} is in {}, but the {} tokens of data.tokenizer {} are written in {}", key,
                                   file, token_format_name(found), tokenizer.vocab_size(), path, token_format_name(format)));
    }
  };
  check_format("train", run.data.train);
  if (run.data.val) check_format("val", *run.data.val);
}

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
  if (run.train.init_from && checked.insert(model.str() + "\n" + *run.train.init_from).second)
    check_init_from_config(*run.train.init_from, run.model);
  if (run.data.tokenizer && checked.insert(model.str() + "\n" + *run.data.tokenizer).second)
    check_tokenizer(table, *run.data.tokenizer, run);
}

void check_program_workdir(toml::table table, const std::string& config_path, CheckedData& checked) {
  const std::string workdir =
      absolute_program_workdir(table, std::filesystem::absolute(config_path).parent_path().string());
  if (checked.insert(workdir).second && !std::filesystem::is_directory(workdir))
    throw BadInput(fmt::format("program.workdir: {} is not a directory", workdir));
}

// The config paths, by their prefixes, that each kind of check reads.
const std::vector<std::string> kRunData{"model.", "data.", "train.init_from"};
const std::vector<std::string> kProgramWhere{"program.workdir"};

bool varies(const SweepSpec& sweep, const std::vector<std::string>& prefixes) {
  for (const std::string& path : sweep.paths())
    for (const std::string& prefix : prefixes)
      if (path.starts_with(prefix)) return true;
  return false;
}

}  // namespace

void preflight_data(const Config& config) {
  // The program and its files are the user's; only where it runs can be checked here.
  const auto check = config.program ? check_program_workdir : check_run_data;
  CheckedData checked;
  if (!config.sweep || !varies(*config.sweep, config.program ? kProgramWhere : kRunData)) {
    check(config.table, config.path, checked);
    return;
  }
  const std::vector<std::string> paths = config.sweep->paths();
  for (const SweepTask& task : expand_sweep(*config.sweep))
    check(task_config(config.table, paths, task.values), config.path, checked);
}

std::shared_ptr<bool> add_no_preflight_flag(CLI::App& command) {
  auto skip = std::make_shared<bool>(false);
  command.add_flag("--no-preflight", *skip,
                   "do not check the data files here (for files that only the compute nodes can see)");
  return skip;
}

}  // namespace trainctl

// The program schema: [program] and [params] of a config, a user's own command run on every rank
// instead of trainctl-runtime (docs/programs.md). The command is an argv list, never given to a
// shell; its placeholders ({run_dir}, {checkpoint_dir}, {params.NAME}, and {budget.steps} in a
// sweep with [sweep.schedule]) are checked when the config is read and filled in on each rank,
// from the run directory it runs for and the step budget of its start.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "run_layout.h"

namespace trainctl {

struct ProgramSpec {
  std::vector<std::string> command;  // as written: placeholders not yet filled in
  // Where the command runs: relative to the config file's directory, empty for that directory
  // itself; resolve_program_workdir makes it absolute in the run directory's config.
  std::string workdir;
  // How `trainctl submit` freezes the code (docs/programs.md, "Frozen code"): "git" (the commit,
  // the tracked files as they are, and the untracked ones snapshot_include names), "files" (the
  // files under workdir that snapshot_include names), or "none" (run in place). Unset: "git" in a
  // git work tree, else "files".
  std::optional<std::string> snapshot;
  // Patterns of paths relative to workdir, shell-style, '*' matching '/' too; unset: none for
  // "git", every file ("*") for "files".
  std::optional<std::vector<std::string>> snapshot_include;
  int64_t snapshot_max_mb = 100;  // a bigger snapshot is refused, naming the biggest files
  toml::table params;  // [params], free-form
  bool reads_budget = false;  // the command has a {budget.steps} placeholder
};

bool has_program(const toml::table& root);

// Reads [program] and [params] of `root`; throws ConfigError (file:line:col, key, message) for
// an empty command, an element that is not a string, and a placeholder that is unknown, unclosed
// or names a value that cannot be an argument (an array or a table).
ProgramSpec parse_program_spec(const toml::table& root, const std::string& file);

// program.workdir of `root` as an absolute path: the written one relative to `base_dir`, or
// `base_dir` itself when none is written.
std::string absolute_program_workdir(const toml::table& root, const std::string& base_dir);

// Sets program.workdir in `root` to an absolute path: the written one relative to `base_dir`,
// or `base_dir` itself when none is written. A config without [program] is left as it is.
void resolve_program_workdir(toml::table& root, const std::string& base_dir);

// The command with its placeholders filled in for the run directory `run` and the start's step
// budget (step_budget.h): what every rank execs. Throws BadInput when the command reads a budget
// and there is none.
std::vector<std::string> program_argv(const ProgramSpec& program, const RunLayout& run,
                                      std::optional<int64_t> budget = std::nullopt);

// [params] as a JSON object, the text of the run directory's params.json.
std::string params_json_text(const ProgramSpec& program);

}  // namespace trainctl

// A whole trainctl config: parsed once, each table handed to its owner ([job] and [notify] to
// slurm/, the training tables to common/train_spec.h, [program] and [params] to program/),
// unknown top-level tables reported with a suggestion.
#pragma once

#include <string>

#include <toml++/toml.h>

#include "follow_up.h"
#include "job_spec.h"
#include "notify_spec.h"
#include "runs/run_dir.h"
#include "program_spec.h"
#include "sweeps/sweep.h"
#include "train_spec.h"

namespace trainctl {

struct Config {
  std::string path;
  toml::table table;
  JobSpec job;
  // What every rank runs; exactly one is set: trainctl-runtime training `run` ([model], [data],
  // [train], [checkpoint]), or the user's own `program` ([program], [params]).
  std::optional<RunSpec> run;
  std::optional<ProgramSpec> program;
  std::optional<SweepSpec> sweep;  // [sweep]: submit makes a job array of the tasks
  std::vector<FollowUpStep> follow_ups;  // [[then]]: jobs that run once the training completed
  std::optional<NotifySpec> notify;  // [notify]: the batch script sends its events
};

// Throws ConfigError (exit 2) for any problem, naming file:line:col and the key.
Config load_config(const std::string& path);

// Checks `table`, a config read from `file`, as load_config does; throws ConfigError.
void check_config_table(const toml::table& table, const std::string& file);

// The files of a run directory for the config `table`: the config as the ranks will read it
// (data paths and a program's workdir made absolute, relative ones being relative to
// `config_path`; headed by where it came from and `note`) and, for a [program], its
// params.json. Throws ConfigError for a [program] that does not parse.
RunFiles run_files(const toml::table& table, const std::string& config_path, const std::string& note = "");

}  // namespace trainctl

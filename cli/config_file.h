// A whole trainctl config: parsed once, each table handed to its owner ([job] to slurm/,
// the training tables to runtime/), unknown top-level tables reported with a suggestion.
#pragma once

#include <string>

#include <toml++/toml.h>

#include "job_spec.h"
#include "train_spec.h"

namespace trainctl {

struct Config {
  std::string path;
  toml::table table;
  JobSpec job;
  RunSpec run;
};

// Throws ConfigError (exit 2) for any problem, naming file:line:col and the key.
Config load_config(const std::string& path);

// The config as the runtime will read it from the run directory: data paths made absolute.
std::string resolved_config_text(const Config& config);

}  // namespace trainctl

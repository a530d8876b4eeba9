// Follow-up steps: a config's [[then]] list, jobs that run in the run directory once its training
// job has completed (sbatch --dependency=afterok, --kill-on-invalid-dep=yes: a training job that
// fails or is stopped cancels them; one that is requeued holds them until it completes).
// Each is one trainctl command or the user's own, run on one node of the job's partition.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

namespace trainctl {

struct FollowUpStep {
  // export: the newest checkpoint as <run dir>/<out>/model.safetensors (trainctl export);
  // evaluate: a checkpoint's validation loss (trainctl eval); sample: text from a prompt
  // (trainctl sample); command: the user's argv, run in the run directory.
  std::string kind;
  std::string out = "export";            // export: relative to the run directory
  std::optional<int64_t> checkpoint;     // evaluate: the step, else the newest checkpoint
  std::string prompt;                    // sample
  int64_t tokens = 100;                  // sample
  std::vector<std::string> command;      // command: argv, no shell
};

// Reads [[then]] of `root`; throws ConfigError (file:line:col, then[N].key, message).
std::vector<FollowUpStep> parse_follow_ups(const toml::table& root, const std::string& file);

// What the follow-up job runs, for the run directory `run_dir` and the trainctl executable
// `trainctl`.
std::vector<std::string> follow_up_argv(const FollowUpStep& step, const std::string& trainctl, const std::string& run_dir);

}  // namespace trainctl

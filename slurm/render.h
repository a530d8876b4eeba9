// Batch-script rendering: turns a JobSpec and a run directory into the bash script that sbatch
// runs. The script asks SLURM for the resources, exports the job's environment, runs the user's
// setup lines, srun's one rank per slot (trainctl-runtime, or trainctl-launch with the user's
// [program]), and requeues its own job when the ranks saved after a signal
// (exit_code::kSavedRequeue), guarded against endless requeue loops. With [notify] it tells of
// each event (failed, hung, requeued, completed) through `trainctl notify`.
// A sweep's script is a job array: each task finds its own run directory from its array index
// and requeues only itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job_spec.h"

namespace trainctl {

// The tasks of one job array: array index i runs the sweep task tasks[i], in the run directory
// <sweep dir>/tasks/<task>.
struct ArrayTasks {
  std::vector<int64_t> tasks;
  std::optional<int64_t> max_parallel;  // array tasks running at once
  // For a sweep with [sweep.schedule]: the absolute path of trainctl, which each task runs as
  // `trainctl sweep rung SWEEP --task T` at its rungs and trains rung by rung as it answers.
  std::optional<std::string> scheduler = std::nullopt;
};

// What srun starts on every slot, with --run-dir.
struct RankCommand {
  std::string executable;  // absolute path of trainctl-runtime, or of trainctl-launch
  // trainctl-launch, running the config's [program]: the script also finds the rendezvous
  // address (the allocation's first node) for it.
  bool user_program = false;
};

struct RenderInputs {
  std::string run_dir;  // absolute path of the run directory, or of the sweep directory
  RankCommand rank;
  std::optional<ArrayTasks> array = std::nullopt;  // a job array (a sweep) instead of one job
  // Nodes blamed for failures in an earlier submission of this run (bad.nodes), excluded beside
  // job.exclude.
  std::vector<std::string> excluded_nodes = {};
  // For a config with [notify]: the absolute path of trainctl, which the script runs as
  // `trainctl notify RUN --event EVENT` once per event. The script names only the run directory;
  // trainctl reads [notify] from its config.toml.
  std::optional<std::string> notifier = std::nullopt;
};

// POSIX single-quoting: the result is one shell word whose value is exactly `value`
// (it's -> 'it'\''s').
std::string shell_quote(std::string_view value);

// `job` must come from parse_job_spec, which limits what can reach an #SBATCH line.
// Throws std::invalid_argument when a path in `inputs` is not absolute or holds characters that
// cannot appear in an #SBATCH line (those lines are read by sbatch, not by a shell, so they
// cannot be quoted).
std::string render_batch_script(const JobSpec& job, const RenderInputs& inputs);

// A follow-up step's job ([[then]], follow_up.h): `argv` run in the run directory on one node of
// the job's partition, with the job's environment and setup lines, its log in logs/ as
// then-<index>-<kind>-<job id>.out and its end in then/<index>.outcome.
struct FollowUpJob {
  std::string run_dir;  // absolute
  int index = 0;
  std::string kind;
  std::vector<std::string> argv;
};
std::string render_follow_up_script(const JobSpec& job, const FollowUpJob& follow_up);

}  // namespace trainctl

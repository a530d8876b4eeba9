// Submitting a sweep: its tasks' run directories and manifest created from the expanded config,
// then the tasks submitted as job arrays, split at the cluster's MaxArraySize, each array
// recorded in the manifest as soon as sbatch accepts it.
#pragma once

#include <string>
#include <vector>

#include "config_file.h"
#include "job_spec.h"
#include "render.h"
#include "slurm_client.h"
#include "sweeps/sweep_dir.h"

namespace trainctl {

// The expanded sweep: its manifest (no arrays yet) and each task's run files.
struct SweepPlan {
  SweepManifest manifest;
  std::vector<RunFiles> task_files;
};

// Throws ConfigError when a task's config is invalid.
SweepPlan plan_sweep(const Config& config);
// The check of plan_sweep alone: every task's whole config, one at a time, none kept or rendered
// (what `validate` needs, in one config's memory at any sweep size). Returns the task count.
size_t check_sweep_tasks(const Config& config);

struct ArrayScript {
  std::vector<int64_t> tasks;  // array index i runs tasks[i]
  std::string text;
};

// The batch scripts that run `tasks` of `manifest` as arrays of at most `max_array_size` tasks each,
// each task telling of its events through `notifier` when set (RenderInputs::notifier), and
// training rung by rung where the sweep has a schedule.
std::vector<ArrayScript> sweep_scripts(const JobSpec& job, const RankCommand& rank,
                                       const std::optional<std::string>& notifier, const SweepDir& sweep,
                                       const SweepManifest& manifest, const std::vector<int64_t>& tasks,
                                       int64_t max_array_size);

// Writes the sweep directory: every task's run directory, sweep.toml and, last, the manifest,
// whose presence marks a complete sweep directory. Refuses a directory that holds a sweep.
void create_sweep_dir(const SweepDir& sweep, const Config& config, const SweepPlan& plan);

// Submits the arrays of sweep_scripts, appending each to `manifest` and rewriting it after every
// sbatch. With max_parallel, each array waits for the one before (afterany), the first for
// `after` when given, so the limit holds for the whole sweep. The caller holds the SweepLock
// (rung_log.h) once the sweep's tasks may run. Returns the job ids.
std::vector<std::string> submit_arrays(const SweepDir& sweep, SweepManifest& manifest,
                                       const std::vector<ArrayScript>& scripts, const std::string& reason,
                                       SlurmClient& slurm, const std::string& after = "");

// Submits `tasks` of a submitted sweep again, rendered from its own sweep.toml, as submit_arrays
// does: its failed tasks (`sweep resubmit --failed`), or the trials a schedule promotes from a
// rung they had stopped at.
std::vector<std::string> resubmit_tasks(const SweepDir& sweep, SweepManifest& manifest,
                                        const std::vector<int64_t>& tasks, const std::string& reason,
                                        SlurmClient& slurm, const std::string& after = "");

}  // namespace trainctl

// What a submission of a run carries beside its batch script: run.json's record (the runtime's
// version, the code snapshot), the job it waits for (--after) and its follow-up jobs ([[then]]).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config_file.h"
#include "run_record.h"
#include "runs/run_dir.h"
#include "slurm_client.h"

namespace trainctl {

// `--after RUN[:ok|:any]`: RUN is a run directory, a sweep directory (every array of it) or a job
// id (digits, or an array task's JOB_TASK). Throws UsageError when RUN is empty or names none, or
// a run that was never submitted; DamagedRunFile when its job_id holds no job id.
Predecessor parse_predecessor(const std::string& after);

// Throws UsageError when `predecessor` is the run in `run_dir` itself, or waits for it through
// its own predecessors (`submit --resume --after` would close the loop).
void refuse_predecessor_loop(const Predecessor& predecessor, const RunDir& run_dir);

// sbatch's options to wait for `predecessor`, and to be cancelled, not left pending, once it has
// ended in a way that cannot satisfy the condition.
std::vector<std::string> dependency_options(const Predecessor& predecessor);

// run.json's record of a new submission (or `trainctl run`) of `config` to `run_dir`: this
// trainctl's version and, for the built-in runtime, the installed trainctl-runtime's. A resumed
// run that recorded another runtime version is refused (UsageError) unless `allow_runtime_change`.
RunRecord new_run_record(const Config& config, const RunDir& run_dir, bool resume, bool allow_runtime_change);

// Submits `config`'s [[then]] steps as jobs that wait for `training_job` to complete; returns them
// as run.json records them. Each job is added to `queued` as soon as SLURM has it, so that a
// submission failing at a later step can cancel it.
std::vector<Follower> submit_follow_ups(const Config& config, const RunDir& run_dir, const std::string& training_job,
                                        SlurmClient& slurm, std::vector<std::string>& queued);

}  // namespace trainctl

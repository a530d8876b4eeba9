// What is known about a sweep: each task's run status, with SLURM's view of every array task
// from one squeue call (never sacct), with [sweep.schedule] its rungs and their decisions, the
// tasks ranked by a metric, and their JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runs/run_status.h"
#include "slurm_client.h"
#include "sweeps/rung_decisions.h"
#include "sweeps/sweep_dir.h"

namespace trainctl {

struct TaskStatus {
  int64_t task = 0;
  RunStatus run;
  std::optional<TrialRungs> rungs;  // with [sweep.schedule]: its results and promotions so far
};

// The ids of the arrays submitted for the sweep.
std::vector<std::string> array_job_ids(const SweepManifest& manifest);

// In task order, joining each run directory with `queued`, SLURM's view of the sweep's arrays
// (SlurmClient::array_tasks of array_job_ids), or nullopt when SLURM did not answer, and with the
// decisions of the sweep's schedule. A task submitted more than once (resubmit, a promotion)
// takes SLURM's view from its newest array.
std::vector<TaskStatus> read_sweep_status(const SweepDir& sweep, const SweepManifest& manifest,
                                          const std::optional<std::vector<ArrayTaskInfo>>& queued);

// Neither queued, running, completed nor stopped at a rung by its schedule: failed, cancelled, or
// with no trace of either (a task whose array was never accepted, or whose record SLURM has
// dropped without an outcome).
// What `sweep resubmit --failed` runs again; only meaningful when SLURM answered.
bool needs_resubmission(const TaskStatus& status);

// kRung: a scheduled sweep's trials by the last rung they reached, the metric there.
enum class RankMetric { kBestValLoss, kLoss, kTask, kRung };
// The rungs for a scheduled sweep; else the best validation loss when any task has one, else
// the last train loss.
RankMetric default_rank_metric(const std::vector<TaskStatus>& statuses);
std::optional<double> metric_of(const TaskStatus& status, RankMetric metric);
// Ascending by the metric, tasks without it last, ties by task index. By kRung: the highest rung
// first, then the best value there (the highest with `maximize`), not-finite values last.
void rank_tasks(std::vector<TaskStatus>& statuses, RankMetric metric, bool maximize = false);

// A scheduled trial's state: SLURM's while it runs, "promoted" while it waits to go on from a rung
// (or its array to start), "stopped at rung K", else its run's (COMPLETED, FAILED, ...).
std::string trial_state(const TaskStatus& status, const SweepSchedule& schedule);
// The steps a scheduled trial has trained: its last logged step, or its last rung's.
int64_t trial_steps(const TaskStatus& status, const SweepSchedule& schedule);

// `sweep status --json`: the ranked tasks, each with its parameters as JSON values (a list
// parameter as an array), its rank when it has the metric, and its run status; with a schedule,
// its trial state, the steps it trained, and each rung reached ({"step", "value", "promoted"}).
std::string sweep_status_json(const SweepManifest& manifest, const std::vector<TaskStatus>& ranked, RankMetric metric);

}  // namespace trainctl

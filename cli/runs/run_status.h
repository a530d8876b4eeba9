// What is known about a run: SLURM's view of its job (scontrol, or squeue; never sacct, which
// a cluster without slurmdbd lacks) joined with the run directory's own record of progress.
// A sweep's tasks are runs too (sweeps/sweep_status.h); only where SLURM's view comes from differs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "json.h"
#include "run_record.h"
#include "runs/run_dir.h"
#include "slurm_client.h"

namespace trainctl {

struct RunStatus {
  std::string run_dir;
  std::string job_id;     // empty for `trainctl run`
  std::string state;      // SLURM's job state, or the outcome the batch script recorded
  std::string reason;     // why a job is pending
  int restarts = 0;
  std::optional<int64_t> step;  // last logged step
  std::optional<double> loss;   // last logged train loss
  std::optional<double> val_loss;       // last validation loss
  std::optional<double> best_val_loss;  // lowest validation loss of the run
  std::optional<int64_t> stopped_early_at;  // the step at which early stopping ended training
  std::string outcome;    // job.outcome's first line: how the batch script last ended
  // Why this submission was requeued before that ("requeued: killed by signal 9 at step 120"),
  // newest first: job.outcome's later lines.
  std::vector<std::string> requeue_reasons;
  // Nodes blamed for its failures, which its requeues exclude.
  std::vector<BlamedNode> excluded_nodes;
  // run.json: the code snapshot, the job it waits for, its follow-up jobs.
  std::optional<RunRecord> submission;
  // How its predecessor (--after) ended, once it has: its state, then its outcome.
  std::string predecessor_end;
  // Where its chain of predecessors loops (PredecessorChain::loop_text), if it does: none of them
  // can end before the others.
  std::string predecessor_loop;
  struct FollowerState {
    Follower follower;
    std::string state;   // SLURM's while it is known there and active, else its then/N.outcome
    std::string reason;  // SLURM's reason while pending
  };
  std::vector<FollowerState> followers;
};

// "export job 12 COMPLETED, evaluate job 13 PENDING (Dependency)".
std::string followers_text(const std::vector<RunStatus::FollowerState>& followers);

// "n1 (hung: ...), n2 (node check: ...)".
std::string excluded_nodes_text(const std::vector<BlamedNode>& nodes);

// The outcome the batch script writes before a requeue: the job goes on.
bool is_requeue_outcome(const std::string& outcome);

// The status table's note: the outcome and the reasons for earlier requeues, else why the job
// is pending.
std::string status_note(const RunStatus& status);

// SLURM's view of a job, when slurmctld still knows it.
struct SlurmView {
  std::string state;
  std::string reason;
  int restart_count = 0;
};

// What the run directory alone says: outcome, job id, requeues and metrics; no state yet. Throws
// DamagedRunFile (run_files.h) naming a file that cannot be read as what it should be.
RunStatus read_run_record(const RunDir& run_dir);

// Sets the state: SLURM's while the job is queued or running, else the outcome the batch script
// wrote (unless it was a requeue or a promotion into a new array task, which are no end; a sweep's
// trial stopped at a rung is STOPPED), else how SLURM saw it end (CANCELLED: the script never got
// to write one), else UNKNOWN.
void settle_state(RunStatus& status, const std::optional<SlurmView>& slurm);

// Queued or running, by SLURM's state: it may still finish.
bool is_active_state(const std::string& state);

RunStatus read_run_status(const RunDir& run_dir, SlurmClient& slurm);

// Adds the status's fields to `record` (a JSON object: the run's own, or a sweep task's) and
// returns it.
Json& add_run_status(Json& record, const RunStatus& status);

// A JSON array of records, one per line, as `status --json` and `sweep status --json` print it.
std::string json_records_text(const std::vector<Json>& records);

}  // namespace trainctl

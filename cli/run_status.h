// What is known about a run: SLURM's view of its job (scontrol, or squeue; never sacct, which
// a cluster without slurmdbd lacks) joined with the run directory's own record of progress.
#pragma once

#include <optional>
#include <string>

#include "run_dir.h"
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
  std::optional<double> val_loss;
  std::string outcome;    // job.outcome, once the batch script has finished
};

RunStatus read_run_status(const RunDir& run_dir, SlurmClient& slurm);

std::string run_status_json(const RunStatus& status);

}  // namespace trainctl

// A scheduled trial's step at its rungs, `trainctl sweep rung SWEEP --task T`, which the task's
// batch script runs as it starts and whenever its ranks end (slurm/render.cpp). Under the sweep's
// lock it records the trial's metric at each rung its metrics.jsonl shows it reached, takes the
// decisions (rung_decisions.h), submits the trials they promote from a rung they had stopped at
// as a new array, and answers what this trial does now. Nothing but the record and the trials'
// own files decides, so a task requeued or resubmitted answers as it would have.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runs/run_dir.h"
#include "slurm_client.h"
#include "sweeps/rung_decisions.h"
#include "sweeps/sweep_dir.h"

namespace trainctl {

enum class RungEvent {
  kStart,        // the task starts or is requeued: where does its trial stand?
  kReached,      // the ranks ended well at the step budget given them
  kRanksFailed,  // the ranks failed: a metric that went non-finite stops the trial instead
};

// What the trial does now, as the one line the batch script reads: "train STEPS" (to that step,
// the rung it goes on to), "stop K" (it stopped at rung K; job.outcome says so), "complete" (it
// reached the last rung), "failed" (after kRanksFailed: nothing stops it, the failure stands).
struct RungAnswer {
  enum class Kind { kTrain, kStop, kComplete, kFailed };
  Kind kind = Kind::kTrain;
  int64_t value = 0;  // the steps to train to, or the rung stopped at
  std::string line() const;
};

// Throws UsageError for a sweep without a schedule or a task it does not have, Failure when the
// ranks ended at `budget` (kReached) without logging the metric there.
RungAnswer take_rung_step(const SweepDir& sweep, int64_t task, RungEvent event, int64_t budget, SlurmClient& slurm);

// The trials promoted from the rung they stopped at whose new array task was never submitted (a
// promotion array that sbatch refused): what `sweep resubmit --failed` submits beside the failed.
std::vector<int64_t> unsubmitted_promotions(const SweepDir& sweep, const std::vector<TrialRungs>& decided,
                                            size_t rungs);

}  // namespace trainctl

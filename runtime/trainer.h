// The trainer: data-parallel training of one run on every rank. Each step accumulates
// gradients over grad_accum micro-batches, averages them across ranks with one all-reduce,
// clips, and takes an optimizer step; then one small all-reduce agrees on the step's loss and
// on whether to stop (a signal on any rank) or save (checkpoint.every_minutes on rank 0).
// It resumes from the newest valid checkpoint of the run directory, so that a resumed run ends
// with the same weights as one that was never interrupted.
#pragma once

#include <stdexcept>
#include <string>

#include "comm.h"
#include "train_spec.h"

namespace trainctl {

// Inputs that do not fit the run (dataset shape, a checkpoint of another model): exit code 2.
class BadRunInput : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunPaths {
  std::string run_dir;
  std::string checkpoints() const { return run_dir + "/checkpoints"; }
  std::string metrics() const { return run_dir + "/metrics.jsonl"; }
  // The step a resume would start from, one integer; the batch script's requeue guard reads it.
  std::string progress() const { return run_dir + "/progress.step"; }
  // Written once training has reached train.steps: the batch script's proof of completion.
  std::string completed() const { return run_dir + "/completed.step"; }
};

// Trains; returns one of exit_code::kDone or kSavedRequeue, or throws.
int train(const RunSpec& spec, const std::string& config_text, const RunPaths& paths, Comm& comm);

}  // namespace trainctl

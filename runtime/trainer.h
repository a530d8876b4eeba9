// The trainer: the training loop of one run on every rank, for any model of the registry. Each
// step accumulates gradients over grad_accum micro-batches, averages them across ranks, clips,
// and takes an optimizer step; then one small all-reduce agrees on the step's loss and on
// whether to stop (a signal on any rank) or save (checkpoint.every_minutes on rank 0).
// Evaluations keep the best validation loss, by which training may stop early and the best
// checkpoint is kept (early_stopping.h).
// Checkpoints (and resuming from them, so that a resumed run ends with the same weights as one
// that was never interrupted) belong to the checkpoint manager. With a step budget
// (step_budget.h) a start trains to that step, saves as at the end, and returns kDone without
// marking the run completed: a sweep's schedule resumes it from there when it promotes it.
#pragma once

#include <string>

#include "comm.h"
#include "run_layout.h"
#include "train_spec.h"

namespace trainctl {

// Trains; returns one of exit_code::kDone or kSavedRequeue, or throws (BadInput for input that
// does not fit the run: exit code 2).
int train(const RunSpec& spec, const std::string& config_text, const RunLayout& layout, Comm& comm);

}  // namespace trainctl

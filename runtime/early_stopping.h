// Early stopping: each evaluation's validation loss judged against the best so far. The best
// (BestValidation) travels in every checkpoint, so that a resumed run stops at the same step and
// keeps the same best checkpoint as one that was never interrupted. As in PyTorch Lightning's
// EarlyStopping (mode "min"), an evaluation improves only when it is below the best by more than
// min_delta, and only an improvement moves the best.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include "train_spec.h"

namespace trainctl {

// The best validation loss so far: what early stopping and checkpoint.keep_best judge by.
// CheckpointMeta (storage/checkpoint.h) stores its fields.
struct BestValidation {
  double val_loss = std::numeric_limits<double>::quiet_NaN();  // NaN: no evaluation yet
  int64_t step = 0;              // the step of that evaluation
  int64_t evals_since_best = 0;  // evaluations since, none of which improved on it
};

// Records the evaluation at `step` in `best`; returns whether it is the new best. A non-finite
// loss never improves.
bool record_evaluation(BestValidation& best, int64_t step, double val_loss,
                       const std::optional<EarlyStopSpec>& early_stop);

// Early stopping is on and `patience` evaluations in a row have not improved.
bool patience_exhausted(const BestValidation& best, const std::optional<EarlyStopSpec>& early_stop);

}  // namespace trainctl

// Early stopping: see early_stopping.h.
#include "early_stopping.h"

#include <cmath>

namespace trainctl {

bool record_evaluation(BestValidation& best, int64_t step, double val_loss,
                       const std::optional<EarlyStopSpec>& early_stop) {
  const double min_delta = early_stop ? early_stop->min_delta : 0.0;
  const bool improved = std::isfinite(val_loss) && (std::isnan(best.val_loss) || val_loss < best.val_loss - min_delta);
  if (improved) {
    best = {val_loss, step, 0};
  } else {
    ++best.evals_since_best;
  }
  return improved;
}

bool patience_exhausted(const BestValidation& best, const std::optional<EarlyStopSpec>& early_stop) {
  return early_stop && best.evals_since_best >= early_stop->patience;
}

}  // namespace trainctl

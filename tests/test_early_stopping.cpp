// Tests for early stopping's judgement (runtime/early_stopping.cpp): only an improvement by more
// than min_delta moves the best and resets the count; patience counts evaluations in a row;
// without early stopping any lower loss is the new best and training never stops early.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "early_stopping.h"

using trainctl::BestValidation;
using trainctl::EarlyStopSpec;

TEST_CASE("an improvement must beat the best by more than min_delta; patience counts the others") {
  const std::optional<EarlyStopSpec> early_stop = EarlyStopSpec{"val_loss", 2, 0.1};
  BestValidation best;
  CHECK(std::isnan(best.val_loss));
  CHECK(record_evaluation(best, 10, 1.0, early_stop));  // the first evaluation is the best so far
  CHECK(best.val_loss == 1.0);
  CHECK(best.step == 10);
  CHECK_FALSE(record_evaluation(best, 20, 0.95, early_stop));  // lower, but by less than min_delta
  CHECK(best.val_loss == 1.0);
  CHECK(best.evals_since_best == 1);
  CHECK_FALSE(patience_exhausted(best, early_stop));
  CHECK(record_evaluation(best, 30, 0.85, early_stop));
  CHECK(best.step == 30);
  CHECK(best.evals_since_best == 0);
  CHECK_FALSE(record_evaluation(best, 40, 2.0, early_stop));
  CHECK_FALSE(record_evaluation(best, 50, std::numeric_limits<double>::quiet_NaN(), early_stop));
  CHECK(best.evals_since_best == 2);
  CHECK(patience_exhausted(best, early_stop));
  CHECK(best.val_loss == 0.85);
}

TEST_CASE("without early stopping, any lower loss is the best and patience never runs out") {
  BestValidation best;
  CHECK(record_evaluation(best, 1, 1.0, std::nullopt));
  CHECK(record_evaluation(best, 2, 0.999, std::nullopt));
  for (int64_t step = 3; step < 100; ++step) CHECK_FALSE(record_evaluation(best, step, 0.999, std::nullopt));
  CHECK(best.step == 2);
  CHECK_FALSE(patience_exhausted(best, std::nullopt));
}

// The decisions of a sweep's schedule (docs/sweeps.md, "The decisions"): which trials go on from
// each rung, as a pure function of the rung results in the order the sweep recorded them. Nothing
// else is recorded, so a requeued task, a failed one resubmitted, and anything that reads the
// sweep later, reach the same decisions from the same record.
//   halving: once every trial promoted to a rung has its result there, the best ⌊n / η⌋ of those
//            n go on. Which trials those are does not depend on the order the results came in.
//   asha:    after each result at a rung, the best ⌊n / η⌋ of the n results there so far go on,
//            each trial once (a trial promoted stays promoted). Which trials go on depends on the
//            order; every rung's best ⌊n / η⌋ of its final n go on in any order.
// Best is the lowest value (the highest with maximize), ties going to the lower trial index; a
// value that is not finite counts as the worst and never goes on.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sweeps/sweep_schedule.h"

namespace trainctl {

struct RungResult {
  int64_t trial = 0;
  int64_t rung = 0;   // the rung's index among the schedule's rungs
  int64_t step = 0;   // the rung's step, for people reading the record
  double value = 0;   // the metric logged at the rung's step; NaN when it was not finite
};

struct TrialRung {
  double value = 0;
  bool promoted = false;  // goes on to the next rung
};

// One trial's rungs: reached[k] for each rung k it has a result at, in rung order.
struct TrialRungs {
  std::vector<TrialRung> reached;
};

// Each of `trials` trials' rungs and promotions under the fitted `schedule` after `log`, in its
// order. A result that is not the trial's next rung (a second one for a rung, or one beyond a
// rung it did not go on from) is ignored.
std::vector<TrialRungs> decide_rungs(const SweepSchedule& schedule, int64_t trials, std::span<const RungResult> log);

// The rung `trial` trains to next: 0 before its first result, the next one after a promotion;
// nullopt once it stopped at its last result's rung (it may still go on there under ASHA) or
// reached the last rung.
std::optional<size_t> next_rung(const TrialRungs& trial, size_t rungs);

}  // namespace trainctl

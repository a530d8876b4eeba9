// The decisions of a sweep's schedule: see rung_decisions.h.
#include "sweeps/rung_decisions.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

namespace trainctl {

namespace {

// A result as the rung ranks it: lower is better.
struct Ranked {
  double badness = 0;
  int64_t trial = 0;
  bool operator<(const Ranked& other) const {
    return std::tie(badness, trial) < std::tie(other.badness, other.trial);
  }
  bool operator>(const Ranked& other) const { return other < *this; }
};

Ranked ranked(const RungResult& result, bool maximize) {
  if (!std::isfinite(result.value)) return {std::numeric_limits<double>::infinity(), result.trial};
  return {maximize ? -result.value : result.value, result.trial};
}

// ASHA's rung: the results there so far, split into the best ⌊n / η⌋ (a max-heap, its worst on
// top) and the rest (a min-heap, its best on top), so that each result costs O(log n).
class AshaRung {
 public:
  // Adds a result; `entered` gets each one that joins the best.
  void add(const Ranked& result, int64_t reduction_factor, const std::function<void(const Ranked&)>& entered) {
    const size_t quota = static_cast<size_t>(++count_ / reduction_factor);
    if (!best_.empty() && result < best_.top()) {
      best_.push(result);
      entered(result);
    } else {
      rest_.push(result);
    }
    while (best_.size() > quota) {
      rest_.push(best_.top());
      best_.pop();
    }
    while (best_.size() < quota && !rest_.empty()) {
      best_.push(rest_.top());
      entered(rest_.top());
      rest_.pop();
    }
  }

 private:
  int64_t count_ = 0;
  std::priority_queue<Ranked> best_;
  std::priority_queue<Ranked, std::vector<Ranked>, std::greater<>> rest_;
};

}  // namespace

std::vector<TrialRungs> decide_rungs(const SweepSchedule& schedule, int64_t trials, std::span<const RungResult> log) {
  const size_t rungs = schedule.rungs.size();
  std::vector<TrialRungs> decided(static_cast<size_t>(std::max<int64_t>(trials, 0)));
  const auto promote = [&](const Ranked& result, size_t rung) {
    if (std::isfinite(result.badness)) decided[static_cast<size_t>(result.trial)].reached[rung].promoted = true;
  };
  std::vector<AshaRung> asha(rungs);
  // Halving: each rung's results, and how many trials it waits for (known once the rung below
  // has promoted).
  std::vector<std::vector<Ranked>> results(rungs);
  std::vector<std::optional<size_t>> expected(rungs);
  if (rungs > 0) expected[0] = decided.size();

  for (const RungResult& result : log) {
    if (result.trial < 0 || result.trial >= trials || result.rung < 0) continue;
    const auto rung = static_cast<size_t>(result.rung);
    TrialRungs& trial = decided[static_cast<size_t>(result.trial)];
    if (rung >= rungs || rung != trial.reached.size() || (rung > 0 && !trial.reached.back().promoted)) continue;
    trial.reached.push_back({result.value, false});
    if (rung + 1 == rungs) continue;  // the last rung promotes nowhere
    const Ranked entry = ranked(result, schedule.maximize);
    if (schedule.kind == SweepSchedule::Kind::kAsha) {
      asha[rung].add(entry, schedule.reduction_factor, [&](const Ranked& entered) { promote(entered, rung); });
      continue;
    }
    results[rung].push_back(entry);
    if (results[rung].size() != expected[rung]) continue;
    std::sort(results[rung].begin(), results[rung].end());
    const size_t quota = results[rung].size() / static_cast<size_t>(schedule.reduction_factor);
    size_t promoted = 0;
    for (size_t i = 0; i < quota; ++i) {
      promote(results[rung][i], rung);
      if (std::isfinite(results[rung][i].badness)) ++promoted;
    }
    expected[rung + 1] = promoted;
  }
  return decided;
}

std::optional<size_t> next_rung(const TrialRungs& trial, size_t rungs) {
  if (trial.reached.empty()) return 0;
  if (trial.reached.size() < rungs && trial.reached.back().promoted) return trial.reached.size();
  return std::nullopt;
}

}  // namespace trainctl

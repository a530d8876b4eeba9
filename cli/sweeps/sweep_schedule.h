// [sweep.schedule]: a sweep that stops its losers early (docs/sweeps.md, "Stopping losers early").
//   [sweep.schedule]
//   kind = "asha"            or "halving": synchronous rungs
//   metric = "val_loss"      what judges a trial at a rung: the value it logged at the rung's step
//   mode = "min"             or "max"
//   reduction_factor = 3     η: the top 1/η of a rung's trials go on
//   min_steps = 20           the first rung; the next ones min_steps × η^k, and the full budget last
//   max_steps = 540          a [program]'s full budget (trainctl-runtime's is train.steps)
// Read with [sweep], then fitted to what the trials run: the rungs must fall where the metric is
// logged, and the trials must be enough for one to reach the last rung.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "config_reader.h"
#include "job_spec.h"
#include "train_spec.h"

namespace trainctl {

struct SweepParameter;

struct SweepSchedule {
  enum class Kind { kAsha, kHalving };
  Kind kind = Kind::kAsha;
  std::string metric = "val_loss";
  bool metric_written = false;  // a [program] must name its metric
  bool maximize = false;        // mode = "max"
  int64_t reduction_factor = 3;
  int64_t min_steps = 0;
  std::optional<int64_t> max_steps;  // as written: a [program]'s
  std::vector<int64_t> rungs;        // their steps, ascending; set by fit_schedule

  const char* kind_name() const { return kind == Kind::kAsha ? "asha" : "halving"; }
  const char* mode_name() const { return maximize ? "max" : "min"; }
};

// [sweep.schedule] of the [sweep] table `sweep` reads; nullopt when there is none. Throws
// ConfigError naming sweep.schedule.KEY.
std::optional<SweepSchedule> read_sweep_schedule(TableReader& sweep);

// min_steps × η^k below `full_steps`, then `full_steps`.
std::vector<int64_t> rung_steps(int64_t min_steps, int64_t reduction_factor, int64_t full_steps);

// What a schedule judges: the config's trials and what they run.
struct ScheduleSubject {
  const toml::table& root;  // the config, [sweep] included
  const std::string& file;
  const RunSpec* run;  // trainctl-runtime's trials; null for a [program]'s
  int64_t trials;
  const std::vector<SweepParameter>& swept;
};

// Sets the rungs (and the runtime's default metric) or throws ConfigError at the key that cannot
// work: a swept key that moves the rungs, max_steps or metric missing for a [program] (or
// max_steps given for the runtime), a metric the runtime never logs, a rung between the
// evaluations (or log steps) that log the metric, early stopping, too few trials for one to reach
// the last rung.
void fit_schedule(SweepSchedule& schedule, const ScheduleSubject& subject);

// The trials that reach each rung under synchronous halving: n_0 = trials, n_k+1 = ⌊n_k / η⌋.
std::vector<int64_t> halving_trials_per_rung(const SweepSchedule& schedule, int64_t trials);
// The steps synchronous halving trains: Σ n_k × (rung_k − rung_k−1). ASHA trains at least as many.
int64_t halving_steps(const SweepSchedule& schedule, int64_t trials);

// What validate and render print about a fitted schedule: its rungs, the trials per rung, and its
// budget in steps (and in node-hours, when job.time says how long a full trial may take) beside
// the full grid's.
std::string schedule_summary(const SweepSchedule& schedule, int64_t trials, const JobSpec& job);

}  // namespace trainctl

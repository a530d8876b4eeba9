// A scheduled trial's step at its rungs: see rung_step.h.
#include "sweeps/rung_step.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "errors.h"
#include "metrics_file.h"
#include "run_files.h"
#include "runs/run_status.h"
#include "sweeps/rung_log.h"
#include "sweeps/sweep_submit.h"

namespace trainctl {

namespace {

// The value logged last at `step`: a run resumed from before it logs the step again.
std::optional<double> value_at(const std::vector<LoggedValue>& values, int64_t step) {
  std::optional<double> found;
  for (const LoggedValue& logged : values)
    if (logged.step == step) found = logged.value;
  return found;
}

// Whether the metric, or the training loss, was logged as not finite after step `after`: the
// runtime stops on a loss that is not finite, and a trial that diverged has no value to rank.
bool went_non_finite(const RunDir& run, const std::string& metric, int64_t after) {
  for (const char* key : {metric.c_str(), "loss"})
    for (const LoggedValue& logged : read_logged_values(run.metrics(), key))
      if (logged.step > after && !std::isfinite(logged.value)) return true;
  return false;
}

bool outcome_starts_with(const RunDir& run, std::string_view prefix) {
  return read_run_file_line(run.outcome()).value_or("").starts_with(prefix);
}

// The array a promotion waits for, so that max_parallel holds over the whole sweep: the newest,
// while SLURM still has any of its tasks to run.
std::string array_to_wait_for(const SweepManifest& manifest, SlurmClient& slurm) {
  if (!manifest.max_parallel || manifest.arrays.empty()) return "";
  const std::string& newest = manifest.arrays.back().job_id;
  for (const ArrayTaskInfo& task : slurm.array_tasks({newest}))
    if (is_active_state(task.state)) return newest;
  return "";
}

// Submits the trials promoted from a rung they had stopped at as one new array, each marked
// promoted first: a crash after sbatch must not leave one looking unsubmitted, to run twice.
void submit_promotions(const SweepDir& sweep, SweepManifest& manifest, const std::vector<TrialRungs>& decided,
                       SlurmClient& slurm) {
  const std::vector<int64_t> promoted = unsubmitted_promotions(sweep, decided, manifest.schedule->rungs.size());
  if (promoted.empty()) return;
  // "1 (step 60)": the rung each stopped at.
  const auto rung_of = [&](int64_t trial) {
    const size_t rung = decided[static_cast<size_t>(trial)].reached.size() - 1;
    return fmt::format("{} (step {})", rung, manifest.schedule->rungs[rung]);
  };
  for (int64_t trial : promoted) {
    sweep.task(trial).reset_submission_record();
    sweep.task(trial).record_outcome(fmt::format("{} {}", run_file::kOutcomePromotedAtRung, rung_of(trial)));
  }
  try {
    const std::vector<std::string> job_ids =
        resubmit_tasks(sweep, manifest, promoted, "promoted", slurm, array_to_wait_for(manifest, slurm));
    fmt::print(stderr, "trainctl: promoted trial(s) {} as job {}\n", fmt::join(promoted, ", "), fmt::join(job_ids, ", "));
  } catch (const std::exception& error) {
    for (int64_t trial : promoted)
      sweep.task(trial).record_outcome(
          fmt::format("{} {}: promoted, not yet submitted", run_file::kOutcomeStoppedAtRung, rung_of(trial)));
    fmt::print(stderr, "trainctl: cannot submit the promoted trial(s) {} ({}); the next rung's end or `trainctl sweep "
                       "resubmit {} --failed` submits them\n",
               fmt::join(promoted, ", "), error.what(), sweep.path());
  }
}

}  // namespace

std::string RungAnswer::line() const {
  switch (kind) {
    case Kind::kTrain: return fmt::format("train {}", value);
    case Kind::kStop: return fmt::format("stop {}", value);
    case Kind::kComplete: return "complete";
    case Kind::kFailed: return "failed";
  }
  return "";
}

std::vector<int64_t> unsubmitted_promotions(const SweepDir& sweep, const std::vector<TrialRungs>& decided,
                                            size_t rungs) {
  std::vector<int64_t> trials;
  for (size_t trial = 0; trial < decided.size(); ++trial)
    if (!decided[trial].reached.empty() && next_rung(decided[trial], rungs) &&
        outcome_starts_with(sweep.task(static_cast<int64_t>(trial)), run_file::kOutcomeStoppedAtRung))
      trials.push_back(static_cast<int64_t>(trial));
  return trials;
}

RungAnswer take_rung_step(const SweepDir& sweep, int64_t task, RungEvent event, int64_t budget, SlurmClient& slurm) {
  const SweepLock lock(sweep);
  SweepManifest manifest = read_manifest(sweep);
  if (!manifest.schedule) throw UsageError(fmt::format("{} is a sweep without [sweep.schedule]", sweep.path()));
  const SweepSchedule& schedule = *manifest.schedule;
  const auto trials = static_cast<int64_t>(manifest.tasks.size());
  if (task < 0 || task >= trials) throw UsageError(fmt::format("{} has no task {}", sweep.path(), task));
  const RunDir run = sweep.task(task);
  const size_t rungs = schedule.rungs.size();

  std::vector<RungResult> log = read_rung_log(sweep);
  std::vector<TrialRungs> decided = decide_rungs(schedule, trials, log);
  const std::vector<LoggedValue> values = read_logged_values(run.metrics(), schedule.metric);
  std::optional<size_t> rung;
  bool not_finite = false;
  // Each rung the trial's metrics show it reached, recorded in turn: a task requeued after a
  // rung's end records it as it starts.
  while ((rung = next_rung(decided[static_cast<size_t>(task)], rungs))) {
    const int64_t step = schedule.rungs[*rung];
    std::optional<double> value = value_at(values, step);
    if (!value && event == RungEvent::kRanksFailed &&
        went_non_finite(run, schedule.metric, *rung == 0 ? 0 : schedule.rungs[*rung - 1]))
      value = std::nan("");
    if (!value) break;
    not_finite = !std::isfinite(*value);
    const RungResult result{task, static_cast<int64_t>(*rung), step, *value};
    append_rung_result(sweep, result);
    log.push_back(result);
    decided = decide_rungs(schedule, trials, log);
  }

  RungAnswer answer;
  const std::vector<TrialRung>& reached = decided[static_cast<size_t>(task)].reached;
  if (rung) {
    const int64_t step = schedule.rungs[*rung];
    if (event == RungEvent::kReached && budget == step)
      throw Failure(fmt::format("task {}'s ranks ended at its budget, step {}, and {} logs no {} there", task, step,
                                run.metrics(), schedule.metric));
    answer = event == RungEvent::kRanksFailed ? RungAnswer{RungAnswer::Kind::kFailed, 0}
                                              : RungAnswer{RungAnswer::Kind::kTrain, step};
  } else if (reached.size() == rungs) {
    answer = {RungAnswer::Kind::kComplete, 0};
  } else {
    const size_t last = reached.size() - 1;
    answer = {RungAnswer::Kind::kStop, static_cast<int64_t>(last)};
    const std::string value = not_finite || !std::isfinite(reached[last].value)
                                  ? "not finite"
                                  : fmt::format("{:.6g}", reached[last].value);
    run.record_outcome(fmt::format("{} {} (step {}): {} {}", run_file::kOutcomeStoppedAtRung, last,
                                   schedule.rungs[last], schedule.metric, value));
  }
  // Only the last rung completes a trial: a [program]'s launcher marks every good end complete.
  if (answer.kind != RungAnswer::Kind::kComplete) std::filesystem::remove(run.completed());
  submit_promotions(sweep, manifest, decided, slurm);
  return answer;
}

}  // namespace trainctl

// What is known about a sweep: see sweep_status.h.
#include "sweeps/sweep_status.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sweeps/rung_log.h"
#include "sweeps/sweep.h"
#include "toml_json.h"

namespace trainctl {

std::vector<std::string> array_job_ids(const SweepManifest& manifest) {
  std::vector<std::string> job_ids;
  for (const ManifestArray& array : manifest.arrays) job_ids.push_back(array.job_id);
  return job_ids;
}

std::vector<TaskStatus> read_sweep_status(const SweepDir& sweep, const SweepManifest& manifest,
                                          const std::optional<std::vector<ArrayTaskInfo>>& queued) {
  std::map<std::string, size_t> array_of_job;  // array job id -> position in the manifest
  // Each task's newest array: a resubmitted task's state is that of its newest run.
  std::vector<std::optional<size_t>> newest_array(manifest.tasks.size());
  for (size_t a = 0; a < manifest.arrays.size(); ++a) {
    array_of_job[manifest.arrays[a].job_id] = a;
    for (int64_t task : manifest.arrays[a].tasks) newest_array[static_cast<size_t>(task)] = a;
  }

  std::vector<std::optional<SlurmView>> views(manifest.tasks.size());
  std::set<size_t> arrays_known;  // arrays slurmctld still has a record of
  for (const ArrayTaskInfo& info : queued.value_or(std::vector<ArrayTaskInfo>{})) {
    auto found = array_of_job.find(info.array_job_id);
    if (found == array_of_job.end()) continue;
    arrays_known.insert(found->second);
    const ManifestArray& array = manifest.arrays[found->second];
    if (info.array_index < 0 || info.array_index >= static_cast<int64_t>(array.tasks.size())) continue;
    const auto task = static_cast<size_t>(array.tasks[static_cast<size_t>(info.array_index)]);
    if (newest_array[task] == found->second) views[task] = SlurmView{info.state, info.reason, info.restart_count};
  }
  std::vector<TrialRungs> decided;
  if (manifest.schedule)
    decided = decide_rungs(*manifest.schedule, static_cast<int64_t>(manifest.tasks.size()), read_rung_log(sweep));
  std::vector<TaskStatus> statuses;
  statuses.reserve(manifest.tasks.size());
  for (const SweepTask& task : manifest.tasks) {
    const auto index = static_cast<size_t>(task.index);
    TaskStatus status{task.index, read_run_record(sweep.task(task.index)), std::nullopt};
    if (manifest.schedule) status.rungs = decided[index];
    // A task cancelled while still pending leaves no record of its own, but its array keeps one
    // while other tasks of it are known; a task that started has written its job id.
    if (!views[index] && status.run.job_id.empty() && newest_array[index] && arrays_known.count(*newest_array[index]))
      views[index] = SlurmView{"CANCELLED", "cancelled before it started", 0};
    settle_state(status.run, views[index]);
    if (!queued) status.run.reason = "SLURM is not reachable";
    statuses.push_back(std::move(status));
  }
  return statuses;
}

bool needs_resubmission(const TaskStatus& status) {
  const std::string& state = status.run.state;
  if (state == "UNKNOWN" || state == "LOCAL") return true;  // not SLURM states: no job to wait for
  return state != "COMPLETED" && state != "STOPPED" && !is_active_state(state);
}

RankMetric default_rank_metric(const std::vector<TaskStatus>& statuses) {
  if (!statuses.empty() && statuses.front().rungs) return RankMetric::kRung;
  const bool any_validation = std::any_of(statuses.begin(), statuses.end(),
                                          [](const TaskStatus& status) { return status.run.best_val_loss.has_value(); });
  return any_validation ? RankMetric::kBestValLoss : RankMetric::kLoss;
}

std::optional<double> metric_of(const TaskStatus& status, RankMetric metric) {
  switch (metric) {
    case RankMetric::kBestValLoss: return status.run.best_val_loss;
    case RankMetric::kLoss: return status.run.loss;
    case RankMetric::kTask: return static_cast<double>(status.task);
    case RankMetric::kRung:
      if (!status.rungs || status.rungs->reached.empty() || !std::isfinite(status.rungs->reached.back().value))
        return std::nullopt;
      return status.rungs->reached.back().value;
  }
  return std::nullopt;
}

void rank_tasks(std::vector<TaskStatus>& statuses, RankMetric metric, bool maximize) {
  if (metric == RankMetric::kRung) {
    // (no result, minus the rungs reached, not finite, value as ranked, task): ascending is best first.
    const auto key = [&](const TaskStatus& status) {
      const size_t reached = status.rungs ? status.rungs->reached.size() : 0;
      const std::optional<double> value = metric_of(status, metric);
      return std::make_tuple(reached == 0, -static_cast<int64_t>(reached), !value.has_value(),
                             maximize ? -value.value_or(0.0) : value.value_or(0.0), status.task);
    };
    std::stable_sort(statuses.begin(), statuses.end(),
                     [&](const TaskStatus& a, const TaskStatus& b) { return key(a) < key(b); });
    return;
  }
  std::stable_sort(statuses.begin(), statuses.end(), [&](const TaskStatus& a, const TaskStatus& b) {
    const std::optional<double> x = metric_of(a, metric), y = metric_of(b, metric);
    return std::make_tuple(!x.has_value(), x.value_or(0.0), a.task) <
           std::make_tuple(!y.has_value(), y.value_or(0.0), b.task);
  });
}

std::string trial_state(const TaskStatus& status, const SweepSchedule& schedule) {
  const std::string& state = status.run.state;
  const std::vector<TrialRung>& reached = status.rungs->reached;
  const bool promoted = !reached.empty() && next_rung(*status.rungs, schedule.rungs.size()).has_value();
  if (state == "STOPPED")
    return promoted ? "promoted" : fmt::format("stopped at rung {}", reached.size() - 1);
  if (promoted && state == "PENDING") return "promoted";
  return state;
}

int64_t trial_steps(const TaskStatus& status, const SweepSchedule& schedule) {
  const size_t reached = status.rungs ? status.rungs->reached.size() : 0;
  return std::max(status.run.step.value_or(0), reached == 0 ? 0 : schedule.rungs[reached - 1]);
}

std::string sweep_status_json(const SweepManifest& manifest, const std::vector<TaskStatus>& ranked, RankMetric metric) {
  std::vector<Json> records;
  int64_t rank = 0;
  for (const TaskStatus& status : ranked) {
    const SweepTask& task = manifest.tasks[static_cast<size_t>(status.task)];
    Json params = Json::object();
    for (size_t i = 0; i < manifest.parameters.size(); ++i) params[manifest.parameters[i]] = json_of(task.values[i]);
    Json& record = records.emplace_back(Json{{"task", status.task}, {"params", std::move(params)}});
    if (metric_of(status, metric)) record["rank"] = ++rank;
    add_run_status(record, status.run);
    if (!manifest.schedule || !status.rungs) continue;
    record["state"] = trial_state(status, *manifest.schedule);
    record["steps_trained"] = trial_steps(status, *manifest.schedule);
    Json rungs = Json::array();
    for (size_t rung = 0; rung < status.rungs->reached.size(); ++rung)
      rungs.push_back({{"step", manifest.schedule->rungs[rung]},
                       {"value", status.rungs->reached[rung].value},
                       {"promoted", status.rungs->reached[rung].promoted}});
    record["rungs"] = std::move(rungs);
  }
  return json_records_text(records);
}

}  // namespace trainctl

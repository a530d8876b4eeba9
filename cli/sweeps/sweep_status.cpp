// What is known about a sweep: see sweep_status.h.
#include "sweeps/sweep_status.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

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
  std::vector<TaskStatus> statuses;
  statuses.reserve(manifest.tasks.size());
  for (const SweepTask& task : manifest.tasks) {
    const auto index = static_cast<size_t>(task.index);
    TaskStatus status{task.index, read_run_record(sweep.task(task.index))};
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
  return state != "COMPLETED" && !is_active_state(state);
}

RankMetric default_rank_metric(const std::vector<TaskStatus>& statuses) {
  const bool any_validation = std::any_of(statuses.begin(), statuses.end(),
                                          [](const TaskStatus& status) { return status.run.best_val_loss.has_value(); });
  return any_validation ? RankMetric::kBestValLoss : RankMetric::kLoss;
}

std::optional<double> metric_of(const TaskStatus& status, RankMetric metric) {
  switch (metric) {
    case RankMetric::kBestValLoss: return status.run.best_val_loss;
    case RankMetric::kLoss: return status.run.loss;
    case RankMetric::kTask: return static_cast<double>(status.task);
  }
  return std::nullopt;
}

void rank_tasks(std::vector<TaskStatus>& statuses, RankMetric metric) {
  std::stable_sort(statuses.begin(), statuses.end(), [&](const TaskStatus& a, const TaskStatus& b) {
    const std::optional<double> x = metric_of(a, metric), y = metric_of(b, metric);
    return std::make_tuple(!x.has_value(), x.value_or(0.0), a.task) <
           std::make_tuple(!y.has_value(), y.value_or(0.0), b.task);
  });
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
  }
  return json_records_text(records);
}

}  // namespace trainctl

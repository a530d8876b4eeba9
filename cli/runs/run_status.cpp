// What is known about a run: see run_status.h.
#include "runs/run_status.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "metrics_file.h"

namespace trainctl {

namespace {
void read_metrics(const std::string& path, RunStatus& status) {
  for (const MetricsLine& line : read_metrics_file(path)) {
    if (line.event && line.event->event == "early_stop") status.stopped_early_at = line.step;
    if (line.train && std::isfinite(line.train->loss)) {
      status.loss = line.train->loss;
      status.step = line.step;
    }
    if (line.eval && std::isfinite(line.eval->val_loss)) {
      status.val_loss = line.eval->val_loss;
      if (!status.best_val_loss || line.eval->val_loss < *status.best_val_loss) status.best_val_loss = line.eval->val_loss;
    }
  }
}

// job.outcome: the last ending, then the reasons for earlier requeues.
void read_outcome(const std::string& path, RunStatus& status) {
  std::ifstream in(path);
  std::getline(in, status.outcome);
  for (std::string line; std::getline(in, line);)
    if (is_requeue_outcome(line)) status.requeue_reasons.push_back(line);
}

int read_count(const std::string& path) {
  std::optional<std::string> text = read_first_line(path);
  if (!text || text->empty() || !std::all_of(text->begin(), text->end(), ::isdigit)) return 0;
  return std::stoi(*text);
}
}  // namespace

bool is_requeue_outcome(const std::string& outcome) { return outcome.starts_with("requeued:"); }

std::string status_note(const RunStatus& status) {
  std::vector<std::string> parts;
  // "running" says nothing that the state does not, and is stale once SLURM has ended the job.
  if (!status.outcome.empty() && status.outcome != run_file::kOutcomeRunning) parts.push_back(status.outcome);
  if (status.stopped_early_at) parts.push_back(fmt::format("stopped early at step {}", *status.stopped_early_at));
  parts.insert(parts.end(), status.requeue_reasons.begin(), status.requeue_reasons.end());
  if (parts.empty()) return status.reason;
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string excluded_nodes_text(const std::vector<BlamedNode>& nodes) {
  std::vector<std::string> parts;
  for (const BlamedNode& blamed : nodes) parts.push_back(fmt::format("{} ({})", blamed.node, blamed.reason));
  return fmt::format("{}", fmt::join(parts, ", "));
}

bool is_active_state(const std::string& state) {
  // SLURM's final states; every other one (PENDING, RUNNING, REQUEUED, COMPLETING, ...) can
  // still change.
  static constexpr std::array<std::string_view, 9> kFinal{"COMPLETED", "FAILED",    "CANCELLED",
                                                          "TIMEOUT",   "NODE_FAIL", "PREEMPTED",
                                                          "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};
  return std::find(kFinal.begin(), kFinal.end(), state) == kFinal.end();
}

RunStatus read_run_record(const RunDir& run_dir) {
  RunStatus status;
  status.run_dir = run_dir.path();
  read_outcome(run_dir.outcome(), status);
  status.job_id = run_dir.job_id().value_or("");
  status.restarts = read_count(run_dir.requeue_count());
  read_metrics(run_dir.metrics(), status);
  status.excluded_nodes = run_dir.blamed_nodes();
  return status;
}

void settle_state(RunStatus& status, const std::optional<SlurmView>& slurm) {
  if (slurm) {
    status.reason = slurm->reason == "None" ? "" : slurm->reason;
    status.restarts = slurm->restart_count;
  }
  if (slurm && is_active_state(slurm->state))
    status.state = slurm->state;
  else if (status.outcome == "completed")
    status.state = "COMPLETED";
  else if (!status.outcome.empty() && !is_requeue_outcome(status.outcome) && status.outcome != run_file::kOutcomeRunning)
    status.state = "FAILED";
  else if (slurm)
    status.state = slurm->state;
  else
    status.state = status.job_id.empty() ? "LOCAL" : "UNKNOWN";
}

RunStatus read_run_status(const RunDir& run_dir, SlurmClient& slurm) {
  RunStatus status = read_run_record(run_dir);
  std::optional<SlurmView> view;
  if (!status.job_id.empty()) {
    try {
      if (std::optional<JobInfo> job = slurm.job(status.job_id)) view = SlurmView{job->state, job->reason, job->restart_count};
    } catch (const SlurmError&) {
      status.reason = "SLURM is not reachable";
    }
  }
  settle_state(status, view);
  return status;
}

Json& add_run_status(Json& record, const RunStatus& status) {
  record["run_dir"] = status.run_dir;
  record["job_id"] = status.job_id;
  record["state"] = status.state;
  record["reason"] = status.reason;
  record["restarts"] = status.restarts;
  if (status.step) record["step"] = *status.step;
  if (status.loss) record["loss"] = *status.loss;
  if (status.val_loss) record["val_loss"] = *status.val_loss;
  if (status.best_val_loss) record["best_val_loss"] = *status.best_val_loss;
  if (status.stopped_early_at) record["stopped_early_at"] = *status.stopped_early_at;
  record["outcome"] = status.outcome;
  if (!status.requeue_reasons.empty()) record["requeue_reasons"] = status.requeue_reasons;
  if (!status.excluded_nodes.empty()) {
    Json nodes = Json::array();
    for (const BlamedNode& blamed : status.excluded_nodes) nodes.push_back({{"node", blamed.node}, {"reason", blamed.reason}});
    record["excluded_nodes"] = nodes;
  }
  return record;
}

std::string json_records_text(const std::vector<Json>& records) {
  std::vector<std::string> lines;
  for (const Json& record : records) lines.push_back(json_text(record));
  return fmt::format("[{}]\n", fmt::join(lines, ",\n "));
}

}  // namespace trainctl

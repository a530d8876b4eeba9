// What is known about a run: see run_status.h.
#include "runs/run_status.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "metrics_file.h"
#include "run_files.h"

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
  for_each_run_file_line(path, run_file_limit::kLines, [&](std::string_view line, int64_t number) {
    if (number == 1)
      status.outcome = line;
    else if (is_requeue_outcome(std::string(line)))
      status.requeue_reasons.emplace_back(line);
  });
}
}  // namespace

bool is_requeue_outcome(const std::string& outcome) { return outcome.starts_with("requeued:"); }

std::string status_note(const RunStatus& status) {
  std::vector<std::string> parts;
  if (!status.predecessor_loop.empty()) parts.push_back(fmt::format("predecessor loop: {}", status.predecessor_loop));
  // "running" says nothing that the state does not, and is stale once SLURM has ended the job.
  if (!status.outcome.empty() && status.outcome != run_file::kOutcomeRunning) parts.push_back(status.outcome);
  if (status.stopped_early_at) parts.push_back(fmt::format("stopped early at step {}", *status.stopped_early_at));
  parts.insert(parts.end(), status.requeue_reasons.begin(), status.requeue_reasons.end());
  if (parts.empty() && status.submission && status.submission->after) {
    // A job that never started because it waits, or waited, for another.
    const Predecessor& after = *status.submission->after;
    const std::string which =
        after.run.empty() ? fmt::format("job {}", after.job) : fmt::format("{} (job {})", after.run, after.job);
    const char* needed = after.condition == "ok" ? "complete" : "end";
    if (status.state == "PENDING") return fmt::format("waits for {} to {} (after{})", which, needed, after.condition);
    if (!status.predecessor_end.empty())
      return fmt::format("cancelled: {} ended {}, and --after {} needed it to {}", which, status.predecessor_end,
                         after.condition, needed);
  }
  if (parts.empty()) return status.reason;
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string followers_text(const std::vector<RunStatus::FollowerState>& followers) {
  std::vector<std::string> parts;
  for (const RunStatus::FollowerState& state : followers)
    parts.push_back(fmt::format("{} job {} {}{}", state.follower.kind, state.follower.job, state.state,
                                state.reason.empty() ? "" : fmt::format(" ({})", state.reason)));
  return fmt::format("{}", fmt::join(parts, ", "));
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
  status.restarts = static_cast<int>(read_run_file_count(run_dir.requeue_count(), INT_MAX).value_or(0));
  read_metrics(run_dir.metrics(), status);
  status.excluded_nodes = run_dir.blamed_nodes();
  status.submission = load_run_record(run_dir);
  return status;
}

void settle_state(RunStatus& status, const std::optional<SlurmView>& slurm) {
  if (slurm) {
    status.reason = slurm->reason == "None" ? "" : slurm->reason;
    status.restarts = slurm->restart_count;
  }
  // A trial promoted into a new array task has not ended: like a requeue, its state is SLURM's.
  const bool ongoing = status.outcome.empty() || is_requeue_outcome(status.outcome) ||
                       status.outcome == run_file::kOutcomeRunning ||
                       status.outcome.starts_with(run_file::kOutcomePromotedAtRung);
  if (slurm && is_active_state(slurm->state))
    status.state = slurm->state;
  else if (status.outcome == "completed")
    status.state = "COMPLETED";
  else if (status.outcome.starts_with(run_file::kOutcomeStoppedAtRung))
    status.state = "STOPPED";
  else if (!ongoing)
    status.state = "FAILED";
  else if (slurm)
    status.state = slurm->state;
  else
    status.state = status.job_id.empty() ? "LOCAL" : "UNKNOWN";
}

namespace {
std::optional<SlurmView> slurm_view(SlurmClient& slurm, const std::string& job_id, std::string& reason) {
  if (job_id.empty()) return std::nullopt;
  try {
    if (std::optional<JobInfo> job = slurm.job(job_id)) return SlurmView{job->state, job->reason, job->restart_count};
  } catch (const SlurmError&) {
    reason = "SLURM is not reachable";
  }
  return std::nullopt;
}

// A follow-up job's state: SLURM's while it is queued or running, else how its script said it
// ended, else how SLURM saw it end (cancelled before it started: its training did not complete).
RunStatus::FollowerState follower_state(const RunDir& run_dir, const Follower& follower, SlurmClient& slurm) {
  RunStatus::FollowerState state{follower, "UNKNOWN", ""};
  const std::optional<SlurmView> view = slurm_view(slurm, follower.job, state.reason);
  const std::string outcome = read_run_file_line(run_dir.follower_outcome(follower.index)).value_or("");
  const bool active = view && is_active_state(view->state);
  if (!active && outcome == "completed") {
    state.state = "COMPLETED";
  } else if (!active && outcome.starts_with("failed")) {
    state.state = "FAILED";
    state.reason = outcome;
  } else if (view) {
    state.state = view->state;
    state.reason = view->reason == "None" ? "" : view->reason;
  }
  return state;
}
}  // namespace

RunStatus read_run_status(const RunDir& run_dir, SlurmClient& slurm) {
  RunStatus status = read_run_record(run_dir);
  const std::optional<SlurmView> view = slurm_view(slurm, status.job_id, status.reason);
  settle_state(status, view);
  if (!status.submission) return status;
  for (const Follower& follower : status.submission->followers)
    status.followers.push_back(follower_state(run_dir, follower, slurm));
  const std::optional<Predecessor>& after = status.submission->after;
  if (after && !after->run.empty())
    if (const PredecessorChain chain = run_dir.predecessor_chain(); chain.loops)
      status.predecessor_loop = chain.loop_text();
  // A job cancelled because its predecessor did not end as it had to never wrote an outcome.
  if (after && status.outcome.empty() && !is_active_state(status.state)) {
    std::string unused;
    if (status.predecessor_loop.empty() && !after->run.empty() && RunDir(after->run).exists()) {
      const RunStatus predecessor = read_run_status(RunDir(after->run), slurm);
      status.predecessor_end = predecessor.state + (predecessor.outcome.empty() ? "" : ": " + predecessor.outcome);
    } else if (const std::optional<SlurmView> predecessor = slurm_view(slurm, after->job, unused)) {
      status.predecessor_end = predecessor->state;
    }
    if (status.state == "UNKNOWN") status.state = "CANCELLED";
  }
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
  if (!status.predecessor_loop.empty()) record["predecessor_loop"] = status.predecessor_loop;
  if (!status.requeue_reasons.empty()) record["requeue_reasons"] = status.requeue_reasons;
  if (!status.excluded_nodes.empty()) {
    Json nodes = Json::array();
    for (const BlamedNode& blamed : status.excluded_nodes) nodes.push_back({{"node", blamed.node}, {"reason", blamed.reason}});
    record["excluded_nodes"] = nodes;
  }
  if (status.submission) {
    const Json submission = run_record_json(*status.submission);
    for (const char* key : {"trainctl_version", "runtime_version", "code", "after"})
      if (submission.contains(key)) record[key] = submission[key];
  }
  if (!status.followers.empty()) {
    Json followers = Json::array();
    for (const RunStatus::FollowerState& state : status.followers)
      followers.push_back({{"index", state.follower.index}, {"kind", state.follower.kind}, {"job", state.follower.job},
                           {"state", state.state}, {"reason", state.reason}});
    record["then"] = followers;
  }
  return record;
}

std::string json_records_text(const std::vector<Json>& records) {
  std::vector<std::string> lines;
  for (const Json& record : records) lines.push_back(json_text(record));
  return fmt::format("[{}]\n", fmt::join(lines, ",\n "));
}

}  // namespace trainctl

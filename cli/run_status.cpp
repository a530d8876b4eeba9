// What is known about a run: see run_status.h.
#include "run_status.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <string_view>

#include "json_line.h"

namespace trainctl {

namespace {
void read_metrics(const std::string& path, RunStatus& status) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (auto loss = json_number(line, "loss")) {
      status.loss = loss;
      status.step = static_cast<int64_t>(*json_number(line, "step"));
    }
    if (auto val_loss = json_number(line, "val_loss")) {
      status.val_loss = val_loss;
      if (!status.best_val_loss || *val_loss < *status.best_val_loss) status.best_val_loss = val_loss;
    }
  }
}

int read_count(const std::string& path) {
  std::optional<std::string> text = read_first_line(path);
  if (!text || text->empty() || !std::all_of(text->begin(), text->end(), ::isdigit)) return 0;
  return std::stoi(*text);
}
}  // namespace

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
  status.outcome = read_first_line(run_dir.outcome()).value_or("");
  status.job_id = run_dir.job_id().value_or("");
  status.restarts = read_count(run_dir.requeue_count());
  read_metrics(run_dir.metrics(), status);
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
  else if (!status.outcome.empty())
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

JsonLine& add_run_status(JsonLine& line, const RunStatus& status) {
  line.add("run_dir", status.run_dir).add("job_id", status.job_id).add("state", status.state);
  line.add("reason", status.reason).add("restarts", static_cast<int64_t>(status.restarts));
  if (status.step) line.add("step", *status.step);
  if (status.loss) line.add("loss", *status.loss);
  if (status.val_loss) line.add("val_loss", *status.val_loss);
  if (status.best_val_loss) line.add("best_val_loss", *status.best_val_loss);
  return line.add("outcome", status.outcome);
}

std::string run_status_json(const RunStatus& status) {
  JsonLine line;
  return add_run_status(line, status).str();
}

}  // namespace trainctl

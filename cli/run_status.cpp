// What is known about a run: see run_status.h.
#include "run_status.h"

#include <fstream>

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
    if (auto val_loss = json_number(line, "val_loss")) status.val_loss = val_loss;
  }
}
}  // namespace

RunStatus read_run_status(const RunDir& run_dir, SlurmClient& slurm) {
  RunStatus status;
  status.run_dir = run_dir.path();
  status.outcome = read_first_line(run_dir.outcome()).value_or("");
  read_metrics(run_dir.metrics(), status);
  status.job_id = run_dir.job_id().value_or("");
  std::optional<JobInfo> job;
  if (!status.job_id.empty()) {
    try {
      job = slurm.job(status.job_id);
    } catch (const SlurmError&) {
      status.reason = "SLURM is not reachable";
    }
  }
  if (job) {
    status.state = job->state;
    status.reason = job->reason == "None" ? "" : job->reason;
    status.restarts = job->restart_count;
  } else if (status.outcome == "completed") {
    status.state = "COMPLETED";
  } else if (!status.outcome.empty()) {
    status.state = "FAILED";
  } else {
    status.state = status.job_id.empty() ? "LOCAL" : "UNKNOWN";
  }
  return status;
}

std::string run_status_json(const RunStatus& status) {
  JsonLine line;
  line.add("run_dir", status.run_dir).add("job_id", status.job_id).add("state", status.state);
  line.add("reason", status.reason).add("restarts", static_cast<int64_t>(status.restarts));
  if (status.step) line.add("step", *status.step);
  if (status.loss) line.add("loss", *status.loss);
  if (status.val_loss) line.add("val_loss", *status.val_loss);
  line.add("outcome", status.outcome);
  return line.str();
}

}  // namespace trainctl

// What a run's notification says: see notification.h.
#include "runs/notification.h"

#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "check.h"
#include "run_files.h"
#include "run_record.h"
#include "runs/run_status.h"

namespace trainctl {

namespace {

std::optional<std::string> nonempty_environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return value;
}

// As the batch script names its job (its requeue target): an array task as <array job>_<index>.
std::optional<std::string> job_of_this_process() {
  const std::optional<std::string> array_job = nonempty_environment("SLURM_ARRAY_JOB_ID");
  const std::optional<std::string> array_task = nonempty_environment("SLURM_ARRAY_TASK_ID");
  if (array_job && array_task) return *array_job + "_" + *array_task;
  return nonempty_environment("SLURM_JOB_ID");
}

template <typename T>
Json or_null(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

// A value as the Slack text shows it: a loss to 4 significant digits.
std::string slack_value(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return fmt::format("{:.4g}", value.get<double>());
  return value.dump();
}

// "job 12 ", " at step 40", " (loss 0.25)": a part of the Slack text, or nothing for a null value.
std::string slack_part(const Json& value, std::string_view before, std::string_view after) {
  return value.is_null() ? "" : fmt::format("{}{}{}", before, slack_value(value), after);
}

// The step a resume starts from: the progress of a [program] that logs no metrics.
std::optional<int64_t> progress_step(const RunDir& run_dir) {
  return read_run_file_count(run_dir.progress(), std::numeric_limits<int64_t>::max());
}

}  // namespace

Json notification_record(const RunDir& run_dir, const std::string& event, const std::optional<std::string>& job) {
  const RunStatus status = read_run_record(run_dir);
  std::optional<std::string> job_id = job ? job : job_of_this_process();
  if (!job_id && !status.job_id.empty()) job_id = status.job_id;
  return Json{
      {"run", run_dir.path()},
      {"job", or_null(job_id)},
      {"event", event},
      {"step", or_null(status.step ? status.step : progress_step(run_dir))},
      {"loss", or_null(status.loss)},
      {"outcome", status.outcome.empty() ? Json(nullptr) : Json(status.outcome)},
      {"host", this_host_name()},
      {"time", utc_timestamp()},
  };
}

std::string notification_message(const Json& record, const std::string& format) {
  if (format != "slack") return json_text(record) + "\n";
  const std::string text = fmt::format("trainctl: run {} {}{}{}{}{}", record["run"].get<std::string>(),
                                       slack_part(record["job"], "job ", " "), record["event"].get<std::string>(),
                                       slack_part(record["step"], " at step ", ""), slack_part(record["loss"], " (loss ", ")"),
                                       slack_part(record["outcome"], ": ", ""));
  return json_text(Json{{"text", text}}) + "\n";
}

}  // namespace trainctl

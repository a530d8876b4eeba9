// The Prometheus textfile of a run: see prometheus_file.h.
#include "prometheus_file.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "bad_input.h"
#include "count_text.h"
#include "check.h"
#include "metrics.h"

namespace trainctl {

namespace {

// SLURM sets SLURM_RESTART_COUNT from the first requeue on.
int64_t requeue_count() {
  const char* text = std::getenv("SLURM_RESTART_COUNT");
  if (text == nullptr) return 0;
  const std::optional<int64_t> count = parse_count(text);
  if (!count) throw BadInput(fmt::format("SLURM_RESTART_COUNT=\"{}\" is not a count", text));
  return *count;
}

// The exposition format escapes these three in label values.
std::string escaped_label_value(std::string_view value) {
  std::string escaped;
  for (const char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

// fmt's `{}` writes a double as the shortest text that reads back as the same double, so the file
// holds exactly the values of metrics.jsonl.
class Exposition {
 public:
  explicit Exposition(const PrometheusFile& file)
      : labels_(fmt::format(R"({{job="{}",run="{}",host="{}"}})", escaped_label_value(file.job),
                            escaped_label_value(file.run), escaped_label_value(file.host))) {}

  template <typename Value>
  void gauge(std::string_view name, std::string_view help, Value value) {
    text_ += fmt::format("# HELP trainctl_{0} {1}\n# TYPE trainctl_{0} gauge\ntrainctl_{0}{2} {3}\n", name, help,
                         labels_, value);
  }
  void gauge_if_finite(std::string_view name, std::string_view help, double value) {
    if (std::isfinite(value)) gauge(name, help, value);
  }
  void gauge_if_positive(std::string_view name, std::string_view help, int64_t value) {
    if (value > 0) gauge(name, help, value);
  }
  const std::string& text() const { return text_; }

 private:
  std::string labels_;
  std::string text_;
};

}  // namespace

PrometheusFile prometheus_file_of_run(const RunLayout& layout, const std::string& configured_path) {
  const std::filesystem::path run_dir = layout.path();
  PrometheusFile file;
  // An absolute configured path replaces the run directory.
  file.path = (run_dir / configured_path).string();
  file.run = (run_dir.has_filename() ? run_dir : run_dir.parent_path()).filename().string();
  const char* job_id = std::getenv("SLURM_JOB_ID");
  file.job = job_id != nullptr && *job_id != '\0' ? job_id : file.run;
  file.host = this_host_name();
  file.requeues = requeue_count();
  return file;
}

std::string prometheus_text(const PrometheusFile& file, const StepRecord& step, double val_loss) {
  Exposition exposition(file);
  exposition.gauge("step", "The optimizer step of the last logged metrics.", step.step);
  exposition.gauge_if_finite("loss", "Training loss at that step, the mean over the global batch.", step.loss);
  exposition.gauge_if_finite("val_loss", "Validation loss of the latest evaluation.", val_loss);
  exposition.gauge_if_finite(
      step.term_unit + "_per_second",
      fmt::format("Training throughput in {} per second, over the steps since the previous log.", step.term_unit),
      step.terms_per_second);
  exposition.gauge_if_finite("step_seconds", "Mean wall time of an optimizer step since the previous log.",
                             step.step_seconds);
  exposition.gauge_if_finite("mfu", "Model FLOPs utilisation: the fraction of the devices' dense peak reached.",
                             step.mfu);
  exposition.gauge_if_positive("peak_rss_bytes", "Peak resident memory of rank 0's process so far.",
                               step.peak_rss_bytes);
  exposition.gauge_if_positive("peak_device_bytes", "Peak device memory rank 0's process has allocated so far.",
                               step.peak_device_bytes);
  exposition.gauge("requeues", "Times SLURM has requeued the job (SLURM_RESTART_COUNT).", file.requeues);
  return exposition.text();
}

}  // namespace trainctl

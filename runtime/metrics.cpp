// Metrics of a run: see metrics.h.
#include "metrics.h"

#include <malloc.h>
#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "atomic_file.h"
#include "json.h"

namespace trainctl {

namespace {
std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0.0) return "-";
  const auto total = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02d}:{:02d}", total / 3600, total / 60 % 60, total % 60);
}
constexpr double kBytesPerMiB = 1024.0 * 1024.0;
}  // namespace

int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux counts it in KiB
}

int64_t held_resident_bytes() {
  std::ifstream status("/proc/self/status");
  int64_t resident_kib = 0;
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:")) resident_kib = std::stoll(line.substr(6));
  return resident_kib * 1024 - static_cast<int64_t>(mallinfo2().fordblks);
}

Metrics::Metrics(const std::string& path, MetricsSetup setup, bool enabled) : setup_(std::move(setup)) {
  if (setup_.term_unit != "samples" && setup_.term_unit != "tokens")
    throw std::invalid_argument(fmt::format("term unit \"{}\" is neither samples nor tokens", setup_.term_unit));
  if (!enabled) return;
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) throw std::runtime_error(fmt::format("cannot open {} for appending", path));
}

Metrics::~Metrics() {
  if (file_ != nullptr) std::fclose(file_);
}

double Metrics::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void Metrics::append(const std::string& line) {
  std::fputs((line + "\n").c_str(), file_);
  std::fflush(file_);
}

void Metrics::log_step(const StepRecord& record) {
  if (file_ == nullptr) return;
  const bool mfu_known = std::isfinite(record.mfu);
  Json line{{"step", record.step}, {"loss", record.loss}, {"lr", record.lr}, {"grad_norm", record.grad_norm}};
  line[setup_.term_unit + "_per_s"] = record.terms_per_second;
  if (mfu_known) line["mfu"] = record.mfu;
  const bool step_time_known = std::isfinite(record.step_seconds);
  if (step_time_known) line["step_time_s"] = record.step_seconds;
  const double peak_rss_mib = static_cast<double>(record.peak_rss_bytes) / kBytesPerMiB;
  if (record.peak_rss_bytes > 0) line["peak_rss_mb"] = peak_rss_mib;
  const double peak_device_mib = static_cast<double>(record.peak_device_bytes) / kBytesPerMiB;
  if (record.peak_device_bytes > 0) line["peak_device_mb"] = peak_device_mib;
  line["global_batch"] = setup_.global_batch;
  line["elapsed_s"] = elapsed_seconds();
  append(json_text(line));
  last_step_ = record;
  rewrite_prometheus_file();

  const double terms_left =
      static_cast<double>((setup_.total_steps - record.step) * setup_.global_batch * setup_.terms_per_example);
  std::string resources;
  if (mfu_known) resources += fmt::format(" | MFU {:.1f}%", 100.0 * record.mfu);
  if (step_time_known) resources += fmt::format(" | {:.1f} ms/step", 1000.0 * record.step_seconds);
  if (record.peak_rss_bytes > 0) resources += fmt::format(" | peak RSS {:.0f} MiB", peak_rss_mib);
  if (record.peak_device_bytes > 0) resources += fmt::format(" | peak GPU {:.0f} MiB", peak_device_mib);
  fmt::print("step {}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.3f} | {:.0f} {}/s{} | ETA {}\n", record.step,
             setup_.total_steps, record.loss, record.lr, record.grad_norm, record.terms_per_second, setup_.term_unit,
             resources, clock_text(terms_left / record.terms_per_second));
  std::fflush(stdout);
}

void Metrics::log_eval(int64_t step, double val_loss, double val_accuracy) {
  if (file_ == nullptr) return;
  Json line{{"step", step}, {"val_loss", val_loss}};
  std::string perplexity_text;
  if (setup_.language_model) {
    const double perplexity = std::exp(val_loss);
    line["val_perplexity"] = perplexity;
    perplexity_text = fmt::format(" | val_perplexity {:.3f}", perplexity);
  }
  line["val_accuracy"] = val_accuracy;
  append(json_text(line));
  last_val_loss_ = val_loss;
  rewrite_prometheus_file();
  fmt::print("step {}/{} | val_loss {:.4f}{} | val_accuracy {:.4f}\n", step, setup_.total_steps, val_loss,
             perplexity_text, val_accuracy);
  std::fflush(stdout);
}

// Monitoring must not cost the training: a file that cannot be written (its directory missing,
// a full disk) is reported once, and every later log step tries again.
void Metrics::rewrite_prometheus_file() {
  if (!setup_.prometheus || !last_step_) return;
  try {
    write_file_atomically(setup_.prometheus->path,
                          prometheus_text(*setup_.prometheus, setup_.term_unit, *last_step_, last_val_loss_));
  } catch (const std::system_error& error) {
    if (!prometheus_failure_reported_)
      fmt::print(stderr, "trainctl-runtime: warning: {}; training goes on, the Prometheus file is retried at each log\n",
                 error.what());
    prometheus_failure_reported_ = true;
  }
}

void Metrics::log_event(int64_t step, const std::string& event, const std::string& detail) {
  if (file_ == nullptr) return;
  append(json_text(Json{{"step", step}, {"event", event}, {"detail", detail}}));
  fmt::print("trainctl: {} at step {}: {}\n", event, step, detail);
  std::fflush(stdout);
}

}  // namespace trainctl

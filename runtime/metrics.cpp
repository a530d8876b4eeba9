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

void Metrics::log_step(StepRecord record) {
  if (file_ == nullptr) return;
  record.term_unit = setup_.term_unit;
  record.global_batch = setup_.global_batch;
  record.elapsed_seconds = elapsed_seconds();
  append(metrics_line(record));
  last_step_ = record;
  rewrite_prometheus_file();

  const double terms_left =
      static_cast<double>((setup_.total_steps - record.step) * setup_.global_batch * setup_.terms_per_example);
  std::string resources;
  if (std::isfinite(record.mfu)) resources += fmt::format(" | MFU {:.1f}%", 100.0 * record.mfu);
  if (std::isfinite(record.step_seconds)) resources += fmt::format(" | {:.1f} ms/step", 1000.0 * record.step_seconds);
  if (record.peak_rss_bytes > 0)
    resources += fmt::format(" | peak RSS {:.0f} MiB", static_cast<double>(record.peak_rss_bytes) / kBytesPerMiB);
  if (record.peak_device_bytes > 0)
    resources += fmt::format(" | peak GPU {:.0f} MiB", static_cast<double>(record.peak_device_bytes) / kBytesPerMiB);
  fmt::print("step {}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.3f} | {:.0f} {}/s{} | ETA {}\n", record.step,
             setup_.total_steps, record.loss, record.lr, record.grad_norm, record.terms_per_second, setup_.term_unit,
             resources, clock_text(terms_left / record.terms_per_second));
  std::fflush(stdout);
}

void Metrics::log_eval(int64_t step, double val_loss, double val_accuracy) {
  if (file_ == nullptr) return;
  EvalRecord record{step, val_loss, val_accuracy};
  std::string perplexity_text;
  if (setup_.language_model) {
    record.val_perplexity = std::exp(val_loss);
    perplexity_text = fmt::format(" | val_perplexity {:.3f}", record.val_perplexity);
  }
  append(metrics_line(record));
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
    write_file_atomically(setup_.prometheus->path, prometheus_text(*setup_.prometheus, *last_step_, last_val_loss_));
  } catch (const std::system_error& error) {
    if (!prometheus_failure_reported_)
      fmt::print(stderr, "trainctl-runtime: warning: {}; training goes on, the Prometheus file is retried at each log\n",
                 error.what());
    prometheus_failure_reported_ = true;
  }
}

void Metrics::log_event(int64_t step, const std::string& event, const std::string& detail) {
  if (file_ == nullptr) return;
  const EventRecord record{step, event, detail};
  append(metrics_line(record));
  print_event(record);
}

void Metrics::log_checkpoint(const CheckpointRecord& record) {
  if (file_ == nullptr) return;
  append(metrics_line(record));
  print_event(record.event());
}

void Metrics::print_event(const EventRecord& record) {
  fmt::print("trainctl: {} at step {}: {}\n", record.event, record.step, record.detail);
  std::fflush(stdout);
}

}  // namespace trainctl

// Metrics of a run: see metrics.h.
#include "metrics.h"

#include <fmt/format.h>

#include "json_line.h"

namespace trainctl {

namespace {
std::string clock_text(double seconds) {
  const auto total = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02d}:{:02d}", total / 3600, total / 60 % 60, total % 60);
}
}  // namespace

Metrics::Metrics(const std::string& path, int64_t total_steps, int64_t global_batch, bool enabled)
    : total_steps_(total_steps), global_batch_(global_batch) {
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
  const double elapsed = elapsed_seconds();
  append(JsonLine()
             .add("step", record.step)
             .add("loss", record.loss)
             .add("lr", record.lr)
             .add("grad_norm", record.grad_norm)
             .add("samples_per_s", record.samples_per_second)
             .add("global_batch", global_batch_)
             .add("elapsed_s", elapsed)
             .str());
  const double eta = static_cast<double>((total_steps_ - record.step) * global_batch_) / record.samples_per_second;
  fmt::print("step {}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.3f} | {:.0f} samples/s | ETA {}\n", record.step,
             total_steps_, record.loss, record.lr, record.grad_norm, record.samples_per_second, clock_text(eta));
  std::fflush(stdout);
}

void Metrics::log_eval(int64_t step, double val_loss, double val_accuracy) {
  if (file_ == nullptr) return;
  append(JsonLine().add("step", step).add("val_loss", val_loss).add("val_accuracy", val_accuracy).str());
  fmt::print("step {}/{} | val_loss {:.4f} | val_accuracy {:.4f}\n", step, total_steps_, val_loss, val_accuracy);
  std::fflush(stdout);
}

void Metrics::log_event(int64_t step, const std::string& event, const std::string& detail) {
  if (file_ == nullptr) return;
  append(JsonLine().add("step", step).add("event", event).add("detail", detail).str());
  fmt::print("trainctl: {} at step {}: {}\n", event, step, detail);
  std::fflush(stdout);
}

}  // namespace trainctl

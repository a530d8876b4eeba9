// Metrics of a run: rank 0 appends one JSON object per logged step to metrics.jsonl (the file
// `trainctl status` reads) and prints a progress line with an ETA for people reading the log.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace trainctl {

struct StepRecord {
  int64_t step = 0;
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  double samples_per_second = 0.0;
};

class Metrics {
 public:
  // `enabled` is false on every rank but 0, which then writes nothing.
  Metrics(const std::string& path, int64_t total_steps, int64_t global_batch, bool enabled);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void log_step(const StepRecord& record);
  void log_eval(int64_t step, double val_loss, double val_accuracy);
  // Run events (start, resume, checkpoint, stop) so the file tells the whole story of a run.
  void log_event(int64_t step, const std::string& event, const std::string& detail);
  double elapsed_seconds() const;

 private:
  void append(const std::string& line);

  std::FILE* file_ = nullptr;
  int64_t total_steps_;
  int64_t global_batch_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace trainctl

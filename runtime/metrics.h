// Metrics of a run: rank 0 appends a record per logged step, evaluation and event to
// metrics.jsonl (its records and their JSON: common/metrics_file.h), prints a progress line with
// an ETA for people reading the log and, with [metrics] prometheus, rewrites a Prometheus textfile
// of the latest values (prometheus_file.h).
// Throughput counts the model's loss terms: samples for a classifier, tokens for a language
// model, which also reports validation perplexity.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "metrics_file.h"
#include "prometheus_file.h"

namespace trainctl {

// This process's peak resident set size so far (getrusage's ru_maxrss), in bytes.
int64_t peak_resident_bytes();
// This process's resident set size now, less the heap that malloc holds free: memory that later
// allocations reuse before the process grows. (Library start-up, cuBLAS's among them, frees
// tens of MiB that stay resident.)
int64_t held_resident_bytes();

// What the metrics need to know about the run.
struct MetricsSetup {
  int64_t total_steps = 0;
  int64_t global_batch = 0;         // examples (rows, or sequences) per step
  int64_t terms_per_example = 1;    // Model::loss_terms_per_example()
  std::string term_unit = "samples";  // Model::term_unit(): "samples" or "tokens"
  bool language_model = false;      // validation also reports perplexity, exp(val_loss)
  std::optional<PrometheusFile> prometheus = std::nullopt;  // unset: no Prometheus textfile
};

class Metrics {
 public:
  // `enabled` is false on every rank but 0, which then writes nothing. Throws
  // std::invalid_argument for a term unit other than "samples" or "tokens".
  Metrics(const std::string& path, MetricsSetup setup, bool enabled);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The record with the run's term unit, global batch and elapsed time stamped on it
  // (metrics_file.h has its keys). Rewrites the Prometheus file.
  void log_step(StepRecord record);
  // val_accuracy is the fraction of loss terms (rows, or tokens) whose argmax is the target.
  // Rewrites the Prometheus file once a step has been logged, which it needs for its other values.
  void log_eval(int64_t step, double val_loss, double val_accuracy);
  // Run events (start, resume, stop) so the file tells the whole story of a run.
  void log_event(int64_t step, const std::string& event, const std::string& detail);
  void log_checkpoint(const CheckpointRecord& record);
  double elapsed_seconds() const;

 private:
  void append(const std::string& line);
  void print_event(const EventRecord& record);
  void rewrite_prometheus_file();

  std::FILE* file_ = nullptr;
  MetricsSetup setup_;
  std::optional<StepRecord> last_step_;
  double last_val_loss_ = std::numeric_limits<double>::quiet_NaN();
  bool prometheus_failure_reported_ = false;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace trainctl

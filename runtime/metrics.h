// Metrics of a run: rank 0 appends one JSON object per logged step to metrics.jsonl (the file
// `trainctl status` reads) and prints a progress line with an ETA for people reading the log.
// Throughput counts the model's loss terms: samples for a classifier, tokens for a language
// model, which also reports validation perplexity.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

namespace trainctl {

struct StepRecord {
  int64_t step = 0;
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  double terms_per_second = 0.0;  // throughput in MetricsSetup::term_unit
  double mfu = std::numeric_limits<double>::quiet_NaN();  // model FLOPs utilisation, a fraction; NaN: unknown
  double step_seconds = std::numeric_limits<double>::quiet_NaN();  // mean wall time of a step since the last log
  int64_t peak_rss_bytes = 0;  // the process's peak resident memory so far (peak_resident_bytes); 0: unknown
};

// This process's peak resident set size so far (getrusage's ru_maxrss), in bytes.
int64_t peak_resident_bytes();

// What the metrics need to know about the run.
struct MetricsSetup {
  int64_t total_steps = 0;
  int64_t global_batch = 0;         // examples (rows, or sequences) per step
  int64_t terms_per_example = 1;    // Model::loss_terms_per_example()
  std::string term_unit = "samples";  // Model::term_unit(): "samples" or "tokens"
  bool language_model = false;      // validation also reports perplexity, exp(val_loss)
};

class Metrics {
 public:
  // `enabled` is false on every rank but 0, which then writes nothing. Throws
  // std::invalid_argument for a term unit other than "samples" or "tokens".
  Metrics(const std::string& path, MetricsSetup setup, bool enabled);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // JSON keys: step, loss, lr, grad_norm, samples_per_s or tokens_per_s, mfu, step_time_s and
  // peak_rss_mb (each when known), global_batch, elapsed_s.
  void log_step(const StepRecord& record);
  // val_accuracy is the fraction of loss terms (rows, or tokens) whose argmax is the target.
  void log_eval(int64_t step, double val_loss, double val_accuracy);
  // Run events (start, resume, checkpoint, stop) so the file tells the whole story of a run.
  void log_event(int64_t step, const std::string& event, const std::string& detail);
  double elapsed_seconds() const;

 private:
  void append(const std::string& line);

  std::FILE* file_ = nullptr;
  MetricsSetup setup_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace trainctl

// metrics.jsonl, a run's record of its training: the records the runtime writes (one JSON object
// a line: a step, an evaluation, an event, a published checkpoint), their JSON, and the one reader
// of the file, which `status`, `plot`, `estimate` and the sweeps read it through.
// The file outlives the build that wrote it: a run directory from an older release and a
// [program]'s own lines ({"step": 100, "loss": 1.23}) must still read, so fields are added and
// never renamed, and a field may be missing: NaN (as is a value that was not finite, which JSON
// writes as null), or 0 for a memory peak.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl {

inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

// A logged training step. JSON keys: step, loss, lr, grad_norm, samples_per_s or tokens_per_s,
// mfu, step_time_s, peak_rss_mb and peak_device_mb (each when known), global_batch, elapsed_s.
struct StepRecord {
  int64_t step = 0;
  double loss = 0.0;
  double lr = kUnknown;
  double grad_norm = kUnknown;
  double terms_per_second = kUnknown;  // throughput in term_unit
  double mfu = kUnknown;               // model FLOPs utilisation, a fraction
  double step_seconds = kUnknown;      // mean wall time of a step since the last log
  int64_t peak_rss_bytes = 0;          // the process's peak resident memory so far; 0: unknown
  int64_t peak_device_bytes = 0;       // the device's peak allocation; 0: no separate device memory
  // The run's, stamped by the writer (runtime/metrics.h).
  std::string term_unit = "samples";  // "samples" or "tokens": the model's loss terms
  int64_t global_batch = 0;           // examples per step; 0: unknown
  double elapsed_seconds = kUnknown;  // since this run of the job started
};

// An evaluation. JSON keys: step, val_loss, val_perplexity (a language model's), val_accuracy.
struct EvalRecord {
  int64_t step = 0;
  double val_loss = 0.0;
  double val_accuracy = kUnknown;    // the fraction of loss terms whose argmax is the target
  double val_perplexity = kUnknown;  // exp(val_loss)
};

// A run event (start, resume, checkpoint_stall, checkpoint_failed, stop, early_stop, done, ...).
// JSON keys: step, event, detail.
struct EventRecord {
  int64_t step = 0;
  std::string event;
  std::string detail;
};

// A checkpoint written and published: the event "checkpoint", its detail the sentence people read
// ("PATH (X MB in S s, R MB/s)"), followed by its values: path, size_mb, write_s. (Older runs
// logged only the sentence: their checkpoint events read as events alone.)
inline constexpr std::string_view kCheckpointEvent = "checkpoint";
struct CheckpointRecord {
  int64_t step = 0;
  std::string path;
  double megabytes = 0.0;  // written, over all ranks (10^6 bytes)
  double seconds = 0.0;    // from staging to published

  // As the event it is logged as, with its sentence for the detail.
  EventRecord event() const;
};

// One line of the file, as JSON text without its newline.
std::string metrics_line(const StepRecord& record);
std::string metrics_line(const EvalRecord& record);
std::string metrics_line(const EventRecord& record);
std::string metrics_line(const CheckpointRecord& record);

// What a line holds. The runtime writes one record a line; a [program]'s line may hold a loss and
// a val_loss together, and keys of its own, which are ignored.
struct MetricsLine {
  int64_t step = 0;
  std::optional<StepRecord> train;             // with a "loss"
  std::optional<EvalRecord> eval;              // with a "val_loss"
  std::optional<EventRecord> event;            // with an "event"
  std::optional<CheckpointRecord> checkpoint;  // the event "checkpoint" with its values
};

// Nothing for a line that is not a JSON object with a numeric step: the line the runtime is
// appending as it is read, or a stray one. Throws BadInput for a number that its field cannot
// hold (a step of 1e30 or 2.5, a negative memory peak), which no writer of the file writes.
std::optional<MetricsLine> parse_metrics_line(std::string_view line);

// Every line of the file at `path` that parses, in order; none when it does not exist. Throws
// DamagedRunFile (run_files.h) naming the file and the line for anything but a regular file, a
// line over 1 MB or a number out of its field's range.
std::vector<MetricsLine> read_metrics_file(const std::string& path);

// A value logged under one key (a field of the records above, or a [program]'s own key), with the
// step of its line; NaN where it was logged as null (not finite).
struct LoggedValue {
  int64_t step = 0;
  double value = 0.0;
};
// Every value logged under `key` in the file at `path`, in file order: the lines that parse and
// hold a number or null there.
std::vector<LoggedValue> read_logged_values(const std::string& path, std::string_view key);

}  // namespace trainctl

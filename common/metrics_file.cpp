// metrics.jsonl: see metrics_file.h. Its keys are spelled here and nowhere else.
#include "metrics_file.h"

#include <cmath>

#include <fmt/format.h>

#include "bad_input.h"
#include "json.h"
#include "run_files.h"

namespace trainctl {

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;
// Steps and counts up to 2^53, below which every whole number is a double exactly; memory peaks up
// to 2^43 MiB, whose bytes fit int64.
constexpr double kMaxWholeNumber = 9007199254740992.0;
constexpr double kMaxMegabytes = 8796093022208.0;

std::string throughput_key(std::string_view term_unit) { return fmt::format("{}_per_s", term_unit); }

// The number at `key`, when it is one (a non-finite value was written as null).
std::optional<double> number_at(const Json& record, const char* key) {
  const auto found = record.find(key);
  if (found == record.end() || !found->is_number()) return std::nullopt;
  return found->get<double>();
}

double number_or_unknown(const Json& record, const char* key) { return number_at(record, key).value_or(kUnknown); }

// The number at `key` converted to int64 once it is known to fit: a whole number from 0 to 2^53,
// or (`megabytes`) a memory peak in MiB as bytes. 0 when absent.
int64_t checked_integer(const Json& record, const char* key, bool megabytes = false) {
  const double value = number_at(record, key).value_or(0.0);
  const double limit = megabytes ? kMaxMegabytes : kMaxWholeNumber;
  if (!(value >= 0.0 && value <= limit) || (!megabytes && value != std::floor(value)))
    throw BadInput(fmt::format("{} {} is not {} from 0 to 2^{}", key, value,
                               megabytes ? "a size in MB" : "a whole number", megabytes ? 43 : 53));
  return static_cast<int64_t>(megabytes ? value * kBytesPerMiB : value);
}

std::string string_at(const Json& record, const char* key) {
  const auto found = record.find(key);
  return found != record.end() && found->is_string() ? found->get<std::string>() : "";
}

StepRecord step_of(const Json& record, int64_t step) {
  StepRecord train;
  train.step = step;
  train.loss = number_or_unknown(record, "loss");
  train.lr = number_or_unknown(record, "lr");
  train.grad_norm = number_or_unknown(record, "grad_norm");
  for (const char* unit : {"samples", "tokens"}) {
    if (const std::optional<double> rate = number_at(record, throughput_key(unit).c_str())) {
      train.term_unit = unit;
      train.terms_per_second = *rate;
    }
  }
  train.mfu = number_or_unknown(record, "mfu");
  train.step_seconds = number_or_unknown(record, "step_time_s");
  train.peak_rss_bytes = checked_integer(record, "peak_rss_mb", /*megabytes=*/true);
  train.peak_device_bytes = checked_integer(record, "peak_device_mb", /*megabytes=*/true);
  train.global_batch = checked_integer(record, "global_batch");
  train.elapsed_seconds = number_or_unknown(record, "elapsed_s");
  return train;
}

EvalRecord eval_of(const Json& record, int64_t step) {
  return {step, number_or_unknown(record, "val_loss"), number_or_unknown(record, "val_accuracy"),
          number_or_unknown(record, "val_perplexity")};
}

// The checkpoint event's values, where it has them.
std::optional<CheckpointRecord> checkpoint_of(const Json& record, int64_t step) {
  const std::optional<double> megabytes = number_at(record, "size_mb");
  const std::optional<double> seconds = number_at(record, "write_s");
  if (!megabytes || !seconds) return std::nullopt;
  return CheckpointRecord{step, string_at(record, "path"), *megabytes, *seconds};
}

}  // namespace

std::string metrics_line(const StepRecord& record) {
  Json line{{"step", record.step}, {"loss", record.loss}, {"lr", record.lr}, {"grad_norm", record.grad_norm}};
  line[throughput_key(record.term_unit)] = record.terms_per_second;
  if (std::isfinite(record.mfu)) line["mfu"] = record.mfu;
  if (std::isfinite(record.step_seconds)) line["step_time_s"] = record.step_seconds;
  if (record.peak_rss_bytes > 0) line["peak_rss_mb"] = static_cast<double>(record.peak_rss_bytes) / kBytesPerMiB;
  if (record.peak_device_bytes > 0)
    line["peak_device_mb"] = static_cast<double>(record.peak_device_bytes) / kBytesPerMiB;
  line["global_batch"] = record.global_batch;
  line["elapsed_s"] = record.elapsed_seconds;
  return json_text(line);
}

std::string metrics_line(const EvalRecord& record) {
  Json line{{"step", record.step}, {"val_loss", record.val_loss}};
  if (std::isfinite(record.val_perplexity)) line["val_perplexity"] = record.val_perplexity;
  line["val_accuracy"] = record.val_accuracy;
  return json_text(line);
}

std::string metrics_line(const EventRecord& record) {
  return json_text(Json{{"step", record.step}, {"event", record.event}, {"detail", record.detail}});
}

EventRecord CheckpointRecord::event() const {
  return {step, std::string(kCheckpointEvent),
          fmt::format("{} ({:.1f} MB in {:.3f} s, {:.0f} MB/s)", path, megabytes, seconds, megabytes / seconds)};
}

std::string metrics_line(const CheckpointRecord& record) {
  const EventRecord event = record.event();
  return json_text(Json{{"step", event.step},
                        {"event", event.event},
                        {"detail", event.detail},
                        {"path", record.path},
                        {"size_mb", record.megabytes},
                        {"write_s", record.seconds}});
}

namespace {
// The line's JSON object and its step; nothing for a line that is not an object with a numeric step.
std::optional<std::pair<Json, int64_t>> record_of(std::string_view text) {
  Json record = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return std::nullopt;
  if (!number_at(record, "step")) return std::nullopt;
  const int64_t step = checked_integer(record, "step");
  return std::pair{std::move(record), step};
}
}  // namespace

std::optional<MetricsLine> parse_metrics_line(std::string_view text) {
  const std::optional<std::pair<Json, int64_t>> parsed = record_of(text);
  if (!parsed) return std::nullopt;
  const Json& record = parsed->first;
  MetricsLine line;
  line.step = parsed->second;
  if (record.contains("loss")) line.train = step_of(record, line.step);
  if (record.contains("val_loss")) line.eval = eval_of(record, line.step);
  if (const auto event = record.find("event"); event != record.end()) {
    line.event = EventRecord{line.step, string_at(record, "event"), string_at(record, "detail")};
    if (line.event->event == kCheckpointEvent) line.checkpoint = checkpoint_of(record, line.step);
  }
  return line;
}

std::vector<MetricsLine> read_metrics_file(const std::string& path) {
  std::vector<MetricsLine> lines;
  for_each_run_file_line(path, run_file_limit::kLines, [&](std::string_view text, int64_t number) {
    try {
      if (std::optional<MetricsLine> line = parse_metrics_line(text)) lines.push_back(std::move(*line));
    } catch (const BadInput& error) {
      throw DamagedRunFile(path, fmt::format("line {}: {}", number, error.what()));
    }
  });
  return lines;
}

std::vector<LoggedValue> read_logged_values(const std::string& path, std::string_view key) {
  std::vector<LoggedValue> values;
  for_each_run_file_line(path, run_file_limit::kLines, [&](std::string_view text, int64_t number) {
    std::optional<std::pair<Json, int64_t>> parsed;
    try {
      parsed = record_of(text);
    } catch (const BadInput& error) {
      throw DamagedRunFile(path, fmt::format("line {}: {}", number, error.what()));
    }
    if (!parsed) return;
    const auto found = parsed->first.find(key);
    if (found == parsed->first.end()) return;
    if (found->is_number()) values.push_back({parsed->second, found->get<double>()});
    if (found->is_null()) values.push_back({parsed->second, kUnknown});
  });
  return values;
}

}  // namespace trainctl

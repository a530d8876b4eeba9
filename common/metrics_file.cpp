// metrics.jsonl: see metrics_file.h. Its keys are spelled here and nowhere else.
#include "metrics_file.h"

#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "json.h"

namespace trainctl {

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

std::string throughput_key(std::string_view term_unit) { return fmt::format("{}_per_s", term_unit); }

// The number at `key`, when it is one (a non-finite value was written as null).
std::optional<double> number_at(const Json& record, const char* key) {
  const auto found = record.find(key);
  if (found == record.end() || !found->is_number()) return std::nullopt;
  return found->get<double>();
}

double number_or_unknown(const Json& record, const char* key) { return number_at(record, key).value_or(kUnknown); }

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
  train.peak_rss_bytes = static_cast<int64_t>(number_at(record, "peak_rss_mb").value_or(0.0) * kBytesPerMiB);
  train.peak_device_bytes = static_cast<int64_t>(number_at(record, "peak_device_mb").value_or(0.0) * kBytesPerMiB);
  train.global_batch = static_cast<int64_t>(number_at(record, "global_batch").value_or(0.0));
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
  const std::optional<double> step = number_at(record, "step");
  if (!step) return std::nullopt;
  return std::pair{std::move(record), static_cast<int64_t>(*step)};
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
  std::ifstream in(path);
  for (std::string text; std::getline(in, text);)
    if (std::optional<MetricsLine> line = parse_metrics_line(text)) lines.push_back(std::move(*line));
  return lines;
}

std::vector<LoggedValue> read_logged_values(const std::string& path, std::string_view key) {
  std::vector<LoggedValue> values;
  std::ifstream in(path);
  for (std::string text; std::getline(in, text);) {
    const std::optional<std::pair<Json, int64_t>> parsed = record_of(text);
    if (!parsed) continue;
    const auto found = parsed->first.find(key);
    if (found == parsed->first.end()) continue;
    if (found->is_number()) values.push_back({parsed->second, found->get<double>()});
    if (found->is_null()) values.push_back({parsed->second, kUnknown});
  }
  return values;
}

}  // namespace trainctl

// JSON in trainctl (metrics.jsonl, checkpoint sidecars, `status --json`): nlohmann-json with
// keys kept in the order they were added, so that a record reads as it always has (step first)
// and scripts that grep for "step":N,"event":... keep working.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainctl {

using Json = nlohmann::ordered_json;

// One compact line. Non-finite numbers are written as null (nlohmann's rule, which
// tests/test_sweep.cpp holds it to); bytes that are not UTF-8 (a path, a hostname) become
// U+FFFD instead of an exception in the middle of a run.
inline std::string json_text(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The object on `line`, or a discarded value when the line is not JSON (a line still being
// appended when it was read).
inline Json parse_json_line(std::string_view line) { return Json::parse(line, nullptr, /*allow_exceptions=*/false); }

// The number at `key` of a metrics record, when it is one (a non-finite value was written as null).
inline std::optional<double> number_at(const Json& record, const char* key) {
  auto found = record.find(key);
  if (found == record.end() || !found->is_number()) return std::nullopt;
  return found->get<double>();
}

}  // namespace trainctl

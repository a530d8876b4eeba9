// JSON in trainctl (metrics.jsonl, checkpoint sidecars, `status --json`): nlohmann-json with
// keys kept in the order they were added, so that a record reads as it always has (step first)
// and scripts that grep for "step":N,"event":... keep working.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace trainctl {

using Json = nlohmann::ordered_json;

// One compact line. Non-finite numbers are written as null (nlohmann's rule, which
// tests/test_sweep.cpp holds it to); bytes that are not UTF-8 (a path, a hostname) become
// U+FFFD instead of an exception in the middle of a run.
inline std::string json_text(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace trainctl

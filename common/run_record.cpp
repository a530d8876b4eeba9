// run.json: see run_record.h.
#include "run_record.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <limits>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "atomic_file.h"
#include "bad_input.h"
#include "build_version.h"
#include "run_files.h"

namespace trainctl {

namespace {
Json code_json(const CodeSnapshot& code) {
  Json json{{"snapshot", code.kind}, {"source", code.source}, {"workdir", code.workdir}};
  if (code.commit) {
    json["commit"] = *code.commit;
    json["dirty"] = code.dirty;
    json["untracked"] = code.untracked;
  }
  json["files"] = code.files;
  json["bytes"] = code.bytes;
  return json;
}

// A run.json that its readers cannot take as it is; run_record_of names the file.
class RecordDamage : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The integer at `key`, from 0 to `max`, read only once it is known to be one that fits.
int64_t checked_integer_at(const Json& json, const char* key, int64_t max) {
  const Json& value = json.at(key);
  const bool fits = value.is_number_unsigned() ? value.get<uint64_t>() <= static_cast<uint64_t>(max)
                                               : value.is_number_integer() && value.get<int64_t>() >= 0 &&
                                                     value.get<int64_t>() <= max;
  if (!fits) throw RecordDamage(fmt::format("\"{}\" is {}, not a whole number from 0 to {}", key, value.dump(), max));
  return value.get<int64_t>();
}

// The string at `key`, which must be one that `valid` accepts, `what` saying what it must be.
std::string checked_string_at(const Json& json, const char* key, bool (*valid)(std::string_view), const char* what) {
  std::string value = json.at(key).get<std::string>();
  if (!valid(value)) throw RecordDamage(fmt::format("\"{}\" is {}, not {}", key, Json(value).dump(), what));
  return value;
}

bool is_follower_kind(std::string_view kind) {
  static constexpr std::array<std::string_view, 4> kKinds{"export", "evaluate", "sample", "command"};
  return std::find(kKinds.begin(), kKinds.end(), kind) != kKinds.end();
}

bool is_condition(std::string_view condition) { return condition == "ok" || condition == "any"; }

// A sweep's arrays are waited for together: "12:13".
bool is_job_id_list(std::string_view jobs) {
  for (size_t start = 0;;) {
    const size_t colon = jobs.find(':', start);
    if (!is_job_id(jobs.substr(start, colon - start))) return false;
    if (colon == std::string_view::npos) return true;
    start = colon + 1;
  }
}

CodeSnapshot code_of(const Json& json) {
  CodeSnapshot code;
  code.kind = json.at("snapshot").get<std::string>();
  code.source = json.at("source").get<std::string>();
  code.workdir = json.at("workdir").get<std::string>();
  if (json.contains("commit")) {
    code.commit = json.at("commit").get<std::string>();
    code.dirty = json.at("dirty").get<bool>();
    code.untracked = json.at("untracked").get<std::vector<std::string>>();
  }
  code.files = checked_integer_at(json, "files", std::numeric_limits<int64_t>::max());
  code.bytes = checked_integer_at(json, "bytes", std::numeric_limits<int64_t>::max());
  return code;
}
}  // namespace

Json run_record_json(const RunRecord& record) {
  Json json{{"trainctl_version", record.trainctl_version}};
  if (record.runtime_version) json["runtime_version"] = *record.runtime_version;
  json["submitted_at"] = record.submitted_at;
  if (record.code) json["code"] = code_json(*record.code);
  if (record.after)
    json["after"] = {{"run", record.after->run}, {"job", record.after->job}, {"condition", record.after->condition}};
  if (!record.followers.empty()) {
    Json& followers = json["then"] = Json::array();
    for (const Follower& follower : record.followers)
      followers.push_back({{"index", follower.index}, {"kind", follower.kind}, {"job", follower.job}});
  }
  return json;
}

RunRecord run_record_of(const Json& json, const std::string& file) {
  try {
    RunRecord record;
    record.trainctl_version = json.at("trainctl_version").get<std::string>();
    record.submitted_at = json.at("submitted_at").get<std::string>();
    if (json.contains("runtime_version")) record.runtime_version = json.at("runtime_version").get<std::string>();
    if (json.contains("code")) record.code = code_of(json.at("code"));
    if (json.contains("after")) {
      const Json& after = json.at("after");
      record.after = Predecessor{after.at("run").get<std::string>(),
                                 checked_string_at(after, "job", is_job_id_list, "a job id or ids joined by ':'"),
                                 checked_string_at(after, "condition", is_condition, "\"ok\" or \"any\"")};
    }
    if (json.contains("then"))
      for (const Json& follower : json.at("then"))
        record.followers.push_back(
            Follower{static_cast<int>(checked_integer_at(follower, "index", kMaxFollowers - 1)),
                     checked_string_at(follower, "kind", is_follower_kind, "a follow-up step's kind"),
                     checked_string_at(follower, "job", is_job_id, "a job id")});
    return record;
  } catch (const Json::exception& error) {
    throw DamagedRunFile(file, fmt::format("not a run record: {}", error.what()));
  } catch (const RecordDamage& error) {
    throw DamagedRunFile(file, fmt::format("not a run record: {}", error.what()));
  }
}

std::optional<RunRecord> load_run_record(const RunLayout& run) {
  const std::optional<std::string> text = read_run_file(run.run_record(), run_file_limit::kRecord);
  if (!text) return std::nullopt;
  Json json;
  try {
    json = Json::parse(*text);
  } catch (const Json::exception& error) {
    throw DamagedRunFile(run.run_record(), fmt::format("not JSON: {}", error.what()));
  }
  return run_record_of(json, run.run_record());
}

void save_run_record(const RunLayout& run, const RunRecord& record) {
  write_file_atomically(run.run_record(), run_record_json(record).dump(2) + "\n");
}

bool is_job_id(std::string_view text) {
  const auto digits = [](std::string_view part) {
    return !part.empty() && part.size() <= 18 &&
           std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const size_t underscore = text.find('_');
  if (underscore == std::string_view::npos) return digits(text);
  return digits(text.substr(0, underscore)) && digits(text.substr(underscore + 1));
}

std::string runtime_version_text() { return "trainctl-runtime " + build_version(); }

std::optional<std::string> runtime_change_refusal(const RunLayout& run, const std::string& running) {
  const std::optional<RunRecord> record = load_run_record(run);
  if (!record || !record->runtime_version || *record->runtime_version == running) return std::nullopt;
  return fmt::format("{} was submitted to {}, and this is {}: a run resumes under the runtime it was submitted "
                     "with; to continue it under this one, submit it again with `trainctl submit CONFIG --resume "
                     "--allow-runtime-change`",
                     run.path(), *record->runtime_version, running);
}

std::string utc_timestamp() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
}

}  // namespace trainctl

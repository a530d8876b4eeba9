// run.json: see run_record.h.
#include "run_record.h"

#include <ctime>
#include <fstream>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "atomic_file.h"
#include "bad_input.h"
#include "build_version.h"

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
  code.files = json.at("files").get<int64_t>();
  code.bytes = json.at("bytes").get<int64_t>();
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
      record.after = Predecessor{after.at("run").get<std::string>(), after.at("job").get<std::string>(),
                                 after.at("condition").get<std::string>()};
    }
    if (json.contains("then"))
      for (const Json& follower : json.at("then"))
        record.followers.push_back(Follower{follower.at("index").get<int>(), follower.at("kind").get<std::string>(),
                                            follower.at("job").get<std::string>()});
    return record;
  } catch (const Json::exception& error) {
    throw BadInput(fmt::format("{} is not a run record: {}", file, error.what()));
  }
}

std::optional<RunRecord> load_run_record(const RunLayout& run) {
  std::ifstream in(run.run_record());
  if (!in) return std::nullopt;
  Json json;
  try {
    json = Json::parse(in);
  } catch (const Json::exception& error) {
    throw BadInput(fmt::format("{} is not JSON: {}", run.run_record(), error.what()));
  }
  return run_record_of(json, run.run_record());
}

void save_run_record(const RunLayout& run, const RunRecord& record) {
  write_file_atomically(run.run_record(), run_record_json(record).dump(2) + "\n");
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

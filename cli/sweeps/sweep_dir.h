// The sweep directory: a sweep's tasks and its durable record, on a filesystem every node sees.
//   sweep.toml                 the config the sweep was expanded from, as the user wrote it
//   manifest.toml              the record: each task's index and parameters, the schedule, and
//                              every array submitted for it (job id, tasks, why); written atomically
//   rungs.jsonl                with [sweep.schedule]: each trial's metric at each rung it reached,
//                              in the order they were recorded (rung_log.h)
//   sweep.lock                 what the writers of the manifest and of rungs.jsonl lock (flock)
//   arrays/array-K.sbatch      the batch script of the K-th array
//   logs/array-<job>_<i>.out   output from before array index i reached its run directory
//   tasks/<index>/             each task's run directory (runs/run_dir.h)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runs/run_dir.h"
#include "sweeps/sweep.h"

namespace trainctl {

class SweepDir {
 public:
  explicit SweepDir(std::string path);  // made absolute

  const std::string& path() const { return path_; }
  std::string config() const { return path_ + "/sweep.toml"; }
  std::string manifest() const { return path_ + "/manifest.toml"; }
  std::string rung_log() const { return path_ + "/rungs.jsonl"; }
  std::string lock() const { return path_ + "/sweep.lock"; }
  std::string logs() const { return path_ + "/logs"; }
  std::string array_script(size_t array) const;
  RunDir task(int64_t index) const;

  bool exists() const;

 private:
  std::string path_;
};

// One array submitted for the sweep: array index i runs task tasks[i].
struct ManifestArray {
  std::string job_id;  // as sbatch printed it; only arrays sbatch accepted are recorded
  std::vector<int64_t> tasks;
  std::string script;      // relative to the sweep directory
  std::string reason;      // "submit", "resubmit --failed"
  std::string after;       // the array it waits for (afterany), so max_parallel holds over all
  std::string submitted;   // UTC, ISO 8601
};

struct SweepManifest {
  std::string name;    // [job] name
  std::string config;  // absolute path of the config the sweep was expanded from
  std::vector<std::string> parameters;  // the swept paths, in file order
  int64_t samples = 1;
  int64_t seed = 0;
  std::optional<int64_t> max_parallel;
  std::optional<SweepSchedule> schedule;  // fitted: its rungs are set
  std::vector<SweepTask> tasks;
  std::vector<ManifestArray> arrays;
};

std::string manifest_text(const SweepManifest& manifest);
// Throws ConfigError (file:line:col: key: message) for a manifest that is not one.
SweepManifest parse_manifest(std::string_view text, const std::string& file);

SweepManifest read_manifest(const SweepDir& sweep);
void write_manifest(const SweepDir& sweep, const SweepManifest& manifest);

}  // namespace trainctl

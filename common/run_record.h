// run.json: what one submission of a run runs, written by `trainctl submit` (and `trainctl run`)
// before the job starts and read back by `trainctl status` and by trainctl-runtime at every start:
// the versions of trainctl and of the runtime it was submitted with, a [program]'s code snapshot,
// the job it waits for (--after) and its follow-up jobs ([[then]]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json.h"
#include "run_layout.h"

namespace trainctl {

// A [program]'s code as captured into the run directory's code/ at submit.
struct CodeSnapshot {
  std::string kind;    // "git" or "files"
  std::string source;  // the directory captured: the git work tree's top, or program.workdir
  std::string workdir;  // program.workdir as written, which the copy stands in for
  std::optional<std::string> commit;     // git: HEAD
  bool dirty = false;                    // git: tracked files differed from HEAD (code.diff)
  std::vector<std::string> untracked;    // git: untracked files taken by program.snapshot_include
  int64_t files = 0;
  int64_t bytes = 0;
};

// The job a submission waits for (`submit --after RUN[:ok|:any]`).
struct Predecessor {
  std::string run;        // its run directory, or empty when given as a job id
  std::string job;        // its SLURM job id
  std::string condition;  // "ok" (afterok) or "any" (afterany)
};

// A follow-up job of the run ([[then]] step `index`).
struct Follower {
  int index = 0;
  std::string kind;  // export, sample, evaluate, command
  std::string job;   // its SLURM job id
};

// [[then]] steps a config may have: their indices in run.json are below it.
inline constexpr int64_t kMaxFollowers = 1000;

struct RunRecord {
  std::string trainctl_version;
  std::optional<std::string> runtime_version;  // trainctl-runtime's --version; none for a [program]
  std::string submitted_at;                    // ISO 8601, UTC
  std::optional<CodeSnapshot> code;
  std::optional<Predecessor> after;
  std::vector<Follower> followers;
};

Json run_record_json(const RunRecord& record);
// Throws DamagedRunFile (run_files.h) naming the file when it is not a run record: a field missing
// or of another type, a number out of its range, a job id, kind or condition that is none.
RunRecord run_record_of(const Json& json, const std::string& file);

// The run directory's run.json; nothing when it has none (a run submitted before it existed).
// Throws DamagedRunFile for anything but a regular file, over 16 MB, or not JSON.
std::optional<RunRecord> load_run_record(const RunLayout& run);

// SLURM's job id as sbatch prints it: digits, or an array task's <array job>_<task>.
bool is_job_id(std::string_view text);
void save_run_record(const RunLayout& run, const RunRecord& record);

// "trainctl-runtime 0.9.0 (revision v0.9.0-12-gabc1234)" as this build's --version prints it.
std::string runtime_version_text();

// Why a runtime of version `running` must not continue a run recorded with another one, or
// nothing when they agree (or the run records none).
std::optional<std::string> runtime_change_refusal(const RunLayout& run, const std::string& running);

// Now, as run.json and notifications write times: "2026-11-27T17:40:00Z".
std::string utc_timestamp();

}  // namespace trainctl

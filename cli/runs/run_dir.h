// The run directory: everything about one run in one place, on a filesystem every node sees.
// Its files are those of common/run_layout.h; here is what the CLI does with them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "run_layout.h"

namespace trainctl {

// What a run directory is created with: the resolved config its ranks read and, for a
// [program], params.json.
struct RunFiles {
  std::string config;
  std::optional<std::string> params_json = std::nullopt;
  bool secret = false;  // the config holds a webhook's URL: only its owner may read it
};

// The runs a run waits for, one after another, as each one's run.json names the next (--after RUN).
struct PredecessorChain {
  // The run itself first; then each predecessor up to one that waits for no run (or for a job id
  // alone) or whose directory is gone, or up to the first run named a second time.
  std::vector<std::string> runs;
  bool loops = false;  // the last run is named twice: the chain never ends

  // "A waits for B, which waits for A" (or "A waits for itself"): the loop alone, from the run
  // named twice.
  std::string loop_text() const;
};

// A node blamed for failures of the run (bad.nodes), with the latest reason.
struct BlamedNode {
  std::string node;
  std::string reason;
};

class RunDir : public RunLayout {
 public:
  explicit RunDir(const std::string& path);  // made absolute

  bool exists() const;
  // Creates the layout with `files`. An existing run directory is refused unless
  // `resume`, in which case its checkpoints stay and training continues from them.
  // Durability::kCallerSyncs leaves the fsync to the caller, who prepares many run directories
  // (a sweep's tasks) and syncs the filesystem once.
  enum class Durability { kSynced, kCallerSyncs };
  void prepare(const RunFiles& files, bool resume, Durability durability = Durability::kSynced) const;
  // Forgets how the last submission ended, keeping checkpoints and metrics: the requeue guards
  // count within one submission.
  void reset_submission_record() const;
  // Makes `outcome` job.outcome's first line, as the batch script's record_outcome does, keeping
  // the reasons of this submission's earlier requeues after it.
  void record_outcome(const std::string& outcome) const;
  // job_id's job; throws DamagedRunFile (run_files.h) when it holds no job id.
  std::optional<std::string> job_id() const;
  // Followed with a set of the runs seen, so that a loop (a run resumed --after one that waits for
  // it) ends the walk. Throws DamagedRunFile for a run.json on the way that is no run record.
  PredecessorChain predecessor_chain() const;
  // The nodes of bad.nodes, each once, in the order first blamed: those the batch script excludes
  // when it requeues the job, and `submit --resume` when it submits the run again.
  std::vector<BlamedNode> blamed_nodes() const;
};

// The run directory the user chose with --run-dir, or by default runs/<job.name> under the
// working directory. Throws UsageError for a path that is not UTF-8 (utf8_problem).
RunDir chosen_run_dir(const std::string& run_dir_option, const std::string& job_name);

// Why `name` (a path) cannot stand in a run directory's records, or nothing when it can: run.json
// and config.toml name the config, the workdir, the run and the snapshot's files, and JSON and TOML
// hold only UTF-8. "byte 7 (0xff) is not UTF-8".
std::optional<std::string> utf8_problem(std::string_view name);

}  // namespace trainctl

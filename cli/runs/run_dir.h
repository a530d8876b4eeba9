// The run directory: everything about one run in one place, on a filesystem every node sees.
// Its files are those of common/run_layout.h; here is what the CLI does with them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "run_layout.h"

namespace trainctl {

// What a run directory is created with: the resolved config its ranks read and, for a
// [program], params.json.
struct RunFiles {
  std::string config;
  std::optional<std::string> params_json = std::nullopt;
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
  std::optional<std::string> job_id() const;
  // The nodes of bad.nodes, each once, in the order first blamed: those the batch script excludes
  // when it requeues the job, and `submit --resume` when it submits the run again.
  std::vector<BlamedNode> blamed_nodes() const;
};

// The run directory the user chose with --run-dir, or by default runs/<job.name> under the
// working directory.
RunDir chosen_run_dir(const std::string& run_dir_option, const std::string& job_name);

// First line of a small text file, or nothing when it is absent.
std::optional<std::string> read_first_line(const std::string& path);

}  // namespace trainctl

// The run directory: everything about one run in one place, on a filesystem every node sees.
//   config.toml      the resolved config the runtime trains from
//   job.sbatch       the batch script that was submitted
//   job_id           SLURM's job id (absent for `trainctl run`)
//   logs/            slurm-<job id>.out, one file across requeues (--open-mode=append)
//   checkpoints/     step-N.h5 and step-N.json (docs/checkpoint-format.md)
//   metrics.jsonl    one JSON object per logged step, eval and event
//   progress.step    the step a resume starts from (written at every checkpoint)
//   completed.step   the final step, written by the runtime when training is done
//   requeue.stalls   the batch script's count of requeues without progress
//   requeue.count    the batch script's count of requeues (SLURM_RESTART_COUNT) of this submission
//   job.outcome      the batch script's final word: completed, failed: ..., stopped: ...
#pragma once

#include <optional>
#include <string>

namespace trainctl {

class RunDir {
 public:
  explicit RunDir(std::string path);  // made absolute

  const std::string& path() const { return path_; }
  std::string config() const { return path_ + "/config.toml"; }
  std::string script() const { return path_ + "/job.sbatch"; }
  std::string job_id_file() const { return path_ + "/job_id"; }
  std::string logs() const { return path_ + "/logs"; }
  std::string checkpoints() const { return path_ + "/checkpoints"; }
  std::string metrics() const { return path_ + "/metrics.jsonl"; }
  std::string progress() const { return path_ + "/progress.step"; }
  std::string outcome() const { return path_ + "/job.outcome"; }
  std::string requeue_count() const { return path_ + "/requeue.count"; }

  bool exists() const;
  // Creates the layout with the resolved config. An existing run directory is refused unless
  // `resume`, in which case its checkpoints stay and training continues from them.
  // Durability::kCallerSyncs leaves the fsync to the caller, who prepares many run directories
  // (a sweep's tasks) and syncs the filesystem once.
  enum class Durability { kSynced, kCallerSyncs };
  void prepare(const std::string& resolved_config, bool resume, Durability durability = Durability::kSynced) const;
  // Forgets how the last submission ended, keeping checkpoints and metrics: the requeue guards
  // count within one submission.
  void reset_submission_record() const;
  std::optional<std::string> job_id() const;

 private:
  std::string path_;
};

// The run directory the user chose with --run-dir, or by default runs/<job.name> under the
// working directory.
RunDir chosen_run_dir(const std::string& run_dir_option, const std::string& job_name);

// First line of a small text file, or nothing when it is absent.
std::optional<std::string> read_first_line(const std::string& path);

}  // namespace trainctl

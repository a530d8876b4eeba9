// SLURM command wrappers: sbatch, scontrol, squeue and scancel, run through a CommandRunner and
// with their text output parsed into values. Accounting (sacct) is never used: a cluster
// without slurmdbd has none.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_runner.h"

namespace trainctl {

// A SLURM command failed; what() names the command and quotes its stderr. The CLI maps it to
// exit code 1.
class SlurmError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct JobInfo {
  std::string job_id;
  std::string state;      // RUNNING, PENDING, COMPLETED, ...
  std::string reason;     // why it is pending, or "None"
  int restart_count = 0;  // how often the job was requeued; 0 when only squeue knew the job
  std::string run_time;   // elapsed, as SLURM prints it: 00:02:13, 1-02:00:00
  std::string node_list;  // empty while pending
  std::string exit_code;  // "status:signal", e.g. "0:0"; empty when only squeue knew the job
};

// One task of a job array as squeue lists it (-r: one line per task, pending ones too).
struct ArrayTaskInfo {
  std::string array_job_id;  // the id sbatch printed for the array
  int64_t array_index = 0;
  std::string state;
  std::string reason;
  int restart_count = 0;
};

// SLURM's MaxArraySize when slurm.conf does not set it.
constexpr int kSlurmDefaultMaxArraySize = 1001;

// Every method throws SlurmError when its command fails.
class SlurmClient {
 public:
  explicit SlurmClient(CommandRunner& runner);

  // `sbatch --parsable [options] <path>`; returns the job id, without the ";<cluster>" sbatch may
  // append.
  std::string submit(const std::string& script_path, const std::vector<std::string>& options = {});
  // `scontrol show job -o <id>`, falling back to squeue when scontrol does not know the id;
  // nullopt when neither does. For an array job's id, the first task scontrol lists.
  std::optional<JobInfo> job(const std::string& job_id);
  // Every task of the given arrays that slurmctld still knows, finished ones included, from one
  // squeue call; ids it no longer knows (purged MinJobAge after they ended) are left out.
  std::vector<ArrayTaskInfo> array_tasks(const std::vector<std::string>& array_job_ids);
  // `scancel <id>`.
  void cancel(const std::string& job_id);
  // `scontrol show config` as key/value pairs.
  std::map<std::string, std::string> config();
  // MaxArraySize from the controller's config; SLURM's default (1001) when it is not listed.
  int max_array_size();

 private:
  CommandRunner& runner_;
};

}  // namespace trainctl

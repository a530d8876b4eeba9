// The run directory's layout, defined once for the three programs that share it: the CLI
// (cli/runs/run_dir.h), the batch script (slurm/render.cpp, which takes its file names from here)
// and the runtime. The CLI reads them back through run_files.h, as every program reads run.json.
//   config.toml      the resolved config the runtime trains from
//   job.sbatch       the batch script that was submitted
//   job_id           SLURM's job id (absent for `trainctl run`)
//   logs/            slurm-<job id>.out, one file across requeues (--open-mode=append)
//   checkpoints/     step-N.h5 and step-N.json (docs/checkpoint-format.md)
//   checkpoints/best/  the best checkpoint by validation loss, with checkpoint.keep_best
//   metrics.jsonl    one JSON object per logged step, eval and event
//   progress.step    the step a resume starts from (written at every checkpoint)
//   completed.step   the final step, written by the runtime when training is done
//   heartbeat.step   the last finished step, rewritten by rank 0 at most ten times a second: the batch
//                    script's hang watchdog reads it
//   requeue.stalls   the batch script's count of requeues without progress
//   requeue.count    the batch script's count of requeues (SLURM_RESTART_COUNT) of this submission
//   job.outcome      the batch script's word: running, then completed, failed: ..., stopped: ...
//                    (a scheduled sweep's trial: stopped at rung K, promoted at rung K)
//   params.json      a [program] job's [params] (docs/programs.md)
//   tokenizer.txt    "<content hash> <directory>" of data.tokenizer, written by the runtime: the
//                    tokenizer the run trained with (its checkpoints record the same)
//   rank.exits/R     how rank R's program ended in the latest run of a [program] job:
//                    "exit C T" or "signal N T", T the time it ended (ns since the epoch)
//   rank.nodes/R     the node rank R runs on in the latest start, one line, written by each rank
//                    (runtime and trainctl-launch) as it starts; the batch script empties it before
//                    each start
//   bad.nodes        "NODE<TAB>REASON" lines, appended: the nodes blamed for a failed node check
//                    (by the runtime and trainctl-launch), a hang, a rank's death by a signal or
//                    SLURM holding a node down (by the batch script); a requeued job excludes them
//   job.nodes        the nodes of the latest start, as SLURM lists them (SLURM_JOB_NODELIST)
//   hang/R           rank R's hang report, written when it gets SIGQUIT: a key=value first line,
//                    then its stack (docs/runtime.md, "Hang reports"); emptied before each start
//   node-check/      the runtime's arrival markers of the node check's collectives, emptied by
//                    rank 0 as each start's check begins
//   run.json         what this submission runs (common/run_record.h): trainctl's and the runtime's
//                    versions, a [program]'s code snapshot (commit, dirty), the job it waits for
//                    (--after) and its follow-up jobs ([[then]])
//   code/            a [program]'s code as submitted, which every start of the job runs from
//   code.diff        with a git snapshot: `git diff HEAD` of the tracked files at submit
//   then/N.outcome   how follow-up step N ended: completed, or failed: exit C
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

namespace trainctl {

namespace run_file {
inline constexpr std::string_view kConfig = "config.toml";
inline constexpr std::string_view kScript = "job.sbatch";
inline constexpr std::string_view kJobId = "job_id";
inline constexpr std::string_view kLogs = "logs";
inline constexpr std::string_view kCheckpoints = "checkpoints";
inline constexpr std::string_view kBestCheckpoint = "best";  // inside kCheckpoints
inline constexpr std::string_view kMetrics = "metrics.jsonl";
inline constexpr std::string_view kProgress = "progress.step";
inline constexpr std::string_view kCompleted = "completed.step";
inline constexpr std::string_view kHeartbeat = "heartbeat.step";
inline constexpr std::string_view kRequeueStalls = "requeue.stalls";
inline constexpr std::string_view kRequeueCount = "requeue.count";
inline constexpr std::string_view kOutcome = "job.outcome";
inline constexpr std::string_view kParams = "params.json";
inline constexpr std::string_view kTokenizer = "tokenizer.txt";
inline constexpr std::string_view kRankExits = "rank.exits";
inline constexpr std::string_view kRankNodes = "rank.nodes";
inline constexpr std::string_view kBadNodes = "bad.nodes";
inline constexpr std::string_view kHang = "hang";
inline constexpr std::string_view kNodeCheckMarkers = "node-check";
inline constexpr std::string_view kJobNodes = "job.nodes";
inline constexpr std::string_view kRunRecord = "run.json";
inline constexpr std::string_view kCode = "code";
inline constexpr std::string_view kCodeDiff = "code.diff";
inline constexpr std::string_view kFollowers = "then";
// job.outcome's first line while the batch script runs (slurm/render.cpp writes it).
inline constexpr std::string_view kOutcomeRunning = "running";
// How a trial of a sweep with [sweep.schedule] ended at a rung, job.outcome's first line
// (cli/sweeps/rung_step.cpp writes them): "stopped at rung 1 (step 60): ...", and once a later
// decision promotes it from there into a new array task, "promoted at rung 1 (step 60)".
inline constexpr std::string_view kOutcomeStoppedAtRung = "stopped at rung";
inline constexpr std::string_view kOutcomePromotedAtRung = "promoted at rung";
// A job's log in logs/ is <prefix><job id><suffix>.
inline constexpr std::string_view kLogPrefix = "slurm-";
inline constexpr std::string_view kLogSuffix = ".out";

// The batch script writes these names inside double quotes, where only '$', '`', '"' and '\'
// are special: plain names keep them literal.
constexpr bool is_plain(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}
static_assert(is_plain(kConfig) && is_plain(kScript) && is_plain(kJobId) && is_plain(kLogs) && is_plain(kCheckpoints) &&
              is_plain(kMetrics) && is_plain(kProgress) && is_plain(kCompleted) && is_plain(kHeartbeat) &&
              is_plain(kRequeueStalls) && is_plain(kRequeueCount) && is_plain(kOutcome) && is_plain(kParams) &&
              is_plain(kRankExits) && is_plain(kRankNodes) && is_plain(kBadNodes) && is_plain(kHang) &&
              is_plain(kNodeCheckMarkers) && is_plain(kJobNodes) && is_plain(kFollowers) && is_plain(kLogPrefix) &&
              is_plain(kLogSuffix));
}  // namespace run_file

// The paths of a run directory's files. The path is taken as given: the batch script renders
// its file variables from RunLayout("$run_dir").
class RunLayout {
 public:
  explicit RunLayout(std::string path) : path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  std::string config() const { return file(run_file::kConfig); }
  std::string script() const { return file(run_file::kScript); }
  std::string job_id_file() const { return file(run_file::kJobId); }
  std::string logs() const { return file(run_file::kLogs); }
  std::string log(std::string_view job_id) const {
    return logs() + "/" + std::string(run_file::kLogPrefix) + std::string(job_id) + std::string(run_file::kLogSuffix);
  }
  std::string checkpoints() const { return file(run_file::kCheckpoints); }
  std::string best_checkpoint_dir() const { return checkpoints() + "/" + std::string(run_file::kBestCheckpoint); }
  std::string metrics() const { return file(run_file::kMetrics); }
  std::string progress() const { return file(run_file::kProgress); }
  std::string completed() const { return file(run_file::kCompleted); }
  std::string heartbeat() const { return file(run_file::kHeartbeat); }
  std::string requeue_stalls() const { return file(run_file::kRequeueStalls); }
  std::string requeue_count() const { return file(run_file::kRequeueCount); }
  std::string outcome() const { return file(run_file::kOutcome); }
  std::string params() const { return file(run_file::kParams); }
  std::string tokenizer() const { return file(run_file::kTokenizer); }
  std::string rank_exits() const { return file(run_file::kRankExits); }
  std::string rank_nodes() const { return file(run_file::kRankNodes); }
  std::string bad_nodes() const { return file(run_file::kBadNodes); }
  std::string hang() const { return file(run_file::kHang); }
  std::string node_check_markers() const { return file(run_file::kNodeCheckMarkers); }
  std::string job_nodes() const { return file(run_file::kJobNodes); }
  std::string run_record() const { return file(run_file::kRunRecord); }
  std::string code() const { return file(run_file::kCode); }
  std::string code_diff() const { return file(run_file::kCodeDiff); }
  std::string followers() const { return file(run_file::kFollowers); }
  std::string follower_outcome(int index) const { return followers() + "/" + std::to_string(index) + ".outcome"; }

 private:
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

  std::string path_;
};

}  // namespace trainctl

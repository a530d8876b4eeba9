// What a submission carries beside its batch script: see submission.h.
#include "runs/submission.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "atomic_file.h"
#include "build_version.h"
#include "child_process.h"
#include "commands.h"
#include "errors.h"
#include "render.h"
#include "sweeps/sweep_dir.h"

namespace trainctl {

Predecessor parse_predecessor(const std::string& after) {
  if (after.empty())
    throw UsageError("--after is empty; give a run directory, a sweep directory or a job id (RUN, RUN:ok or RUN:any)");
  Predecessor predecessor{after, "", "ok"};
  for (const char* condition : {"ok", "any"}) {
    const std::string suffix = std::string(":") + condition;
    if (after.size() > suffix.size() && after.ends_with(suffix)) {
      predecessor.run = after.substr(0, after.size() - suffix.size());
      predecessor.condition = condition;
    }
  }
  if (const RunDir run(predecessor.run); run.exists()) {
    predecessor.run = run.path();
    const std::optional<std::string> job = run.job_id();
    if (!job) throw UsageError(fmt::format("--after {}: the run was never submitted (no {})", after, run_file::kJobId));
    predecessor.job = *job;
    return predecessor;
  }
  if (const SweepDir sweep(predecessor.run); sweep.exists()) {
    predecessor.run = sweep.path();
    std::vector<std::string> arrays;
    for (const ManifestArray& array : read_manifest(sweep).arrays) {
      if (!is_job_id(array.job_id))
        throw UsageError(fmt::format("--after {}: {} holds {:?} for an array's job, which is no job id", after,
                                     sweep.manifest(), array.job_id));
      arrays.push_back(array.job_id);
    }
    if (arrays.empty()) throw UsageError(fmt::format("--after {}: the sweep has no submitted arrays", after));
    predecessor.job = fmt::format("{}", fmt::join(arrays, ":"));
    return predecessor;
  }
  if (!is_job_id(predecessor.run))
    throw UsageError(fmt::format("--after {}: {} is neither a run directory, a sweep directory nor a job id (digits, "
                                 "or an array task's JOB_TASK; write RUN, RUN:ok or RUN:any)",
                                 after, predecessor.run));
  predecessor.job = predecessor.run;
  predecessor.run.clear();
  return predecessor;
}

void refuse_predecessor_loop(const Predecessor& predecessor, const RunDir& run_dir) {
  if (predecessor.run.empty()) return;
  if (predecessor.run == run_dir.path())
    throw UsageError(fmt::format("--after {}: that is this run itself, which cannot wait for itself", predecessor.run));
  const PredecessorChain chain = RunDir(predecessor.run).predecessor_chain();
  if (std::find(chain.runs.begin(), chain.runs.end(), run_dir.path()) != chain.runs.end())
    throw UsageError(fmt::format("--after {}: it waits for this run ({}), so the two would wait for each other in a "
                                 "loop; submit without --after, or after another run",
                                 predecessor.run, fmt::join(chain.runs, " waits for ")));
}

std::vector<std::string> dependency_options(const Predecessor& predecessor) {
  return {fmt::format("--dependency=after{}:{}", predecessor.condition, predecessor.job), "--kill-on-invalid-dep=yes"};
}

namespace {
// The installed trainctl-runtime's version, as its --version prints it.
std::string installed_runtime_version() {
  const CapturedRun run = run_capturing({runtime_executable(), "--version"});
  std::string version = run.out.substr(0, run.out.find('\n'));
  if (run.end != ProcessEnd::exited(0) || version.empty())
    throw Failure(fmt::format("{} --version did not tell its version: {}", runtime_executable(), run.out + run.err));
  return version;
}

}  // namespace

RunRecord new_run_record(const Config& config, const RunDir& run_dir, bool resume, bool allow_runtime_change) {
  RunRecord record;
  record.trainctl_version = "trainctl " + build_version();
  record.submitted_at = utc_timestamp();
  if (config.program) return record;
  record.runtime_version = installed_runtime_version();
  if (!resume || allow_runtime_change) return record;
  if (const std::optional<std::string> refusal = runtime_change_refusal(run_dir, *record.runtime_version))
    throw UsageError(*refusal);
  return record;
}

std::vector<Follower> submit_follow_ups(const Config& config, const RunDir& run_dir, const std::string& training_job,
                                        SlurmClient& slurm, std::vector<std::string>& queued) {
  const std::string trainctl = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<Follower> followers;
  std::filesystem::create_directories(run_dir.followers());
  for (size_t index = 0; index < config.follow_ups.size(); ++index) {
    const FollowUpStep& step = config.follow_ups[index];
    const int number = static_cast<int>(index);
    const std::string script = render_follow_up_script(
        config.job, {run_dir.path(), number, step.kind, follow_up_argv(step, trainctl, run_dir.path())});
    const std::string script_path = fmt::format("{}/{}.sbatch", run_dir.followers(), number);
    write_file_atomically(script_path, script);
    chmod(script_path.c_str(), 0755);
    std::filesystem::remove(run_dir.follower_outcome(number));
    const std::string& job =
        queued.emplace_back(slurm.submit(script_path, dependency_options({run_dir.path(), training_job, "ok"})));
    followers.push_back({number, step.kind, job});
  }
  return followers;
}

}  // namespace trainctl

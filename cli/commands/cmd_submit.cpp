// trainctl submit CONFIG: creates the run directory and submits its batch script with sbatch;
// a config with [sweep] becomes a sweep directory submitted as job arrays. Its data files
// (preflight.h) and job.mem against the estimated memory (estimate/memory_estimate.h) are checked first.
// The run directory gets run.json (the runtime's version, a [program]'s code snapshot in code/),
// the job may wait for another (--after), and [[then]] steps follow it as jobs of their own.
#include <sys/stat.h>

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "atomic_file.h"
#include "commands.h"
#include "config_file.h"
#include "errors.h"
#include "runs/code_snapshot.h"
#include "runs/run_dir.h"
#include "runs/submission.h"
#include "estimate/memory_estimate.h"
#include "preflight.h"
#include "slurm_client.h"
#include "sweeps/rung_log.h"
#include "sweeps/sweep_submit.h"

namespace trainctl {

namespace {
// What a [program]'s code snapshot will take, checked against its size limit before anything is
// written; nothing for the built-in runtime, snapshot = "none" or --no-snapshot.
std::optional<SnapshotPlan> plan_snapshot(const Config& config, bool no_snapshot) {
  return no_snapshot ? std::nullopt : plan_config_snapshot(config);
}

// `config` with the program run from the snapshot's copy in `run` (a run or a sweep directory);
// where it came from is in run.json.
Config frozen_config(const Config& config, const SnapshotPlan& snapshot, const RunLayout& run) {
  Config frozen = config;
  frozen.table["program"].as_table()->insert_or_assign("workdir", snapshot_workdir(snapshot, run));
  return frozen;
}

// Undoes a submission that failed part way, so that the corrected config submits as new again:
// cancels the jobs it queued, then removes `created`, what the submission made (nothing for a
// resumed run). A job that cannot be cancelled keeps the directory it would run in.
void abandon_submission(const std::string& created, const std::vector<std::string>& queued, SlurmClient& slurm) {
  bool cancelled = true;
  for (const std::string& job : queued) {
    try {
      slurm.cancel(job);
    } catch (const std::exception& error) {
      cancelled = false;
      fmt::print(stderr, "trainctl: job {} was queued and could not be cancelled ({}); cancel it with scancel {}\n",
                 job, error.what(), job);
    }
  }
  if (cancelled && !created.empty()) std::filesystem::remove_all(created);
}

std::string frozen_note(const SnapshotPlan& snapshot) {
  return fmt::format("program.workdir: the code snapshot of {}, taken at submit (run.json)", snapshot.record.workdir);
}

void submit_sweep(const Config& config, const std::string& directory, bool no_snapshot) {
  const SweepDir sweep(directory);
  const std::optional<SnapshotPlan> snapshot = plan_snapshot(config, no_snapshot);
  if (snapshot && std::ranges::count(config.sweep->paths(), "program.workdir") > 0)
    throw UsageError("the sweep varies program.workdir, so its tasks run code from several folders, which one "
                     "snapshot cannot hold; pass --no-snapshot to run each in place");
  SweepPlan plan = plan_sweep(snapshot ? frozen_config(config, *snapshot, RunLayout(sweep.path())) : config);
  ProcessRunner runner;
  SlurmClient slurm(runner);
  std::vector<int64_t> tasks;
  for (const SweepTask& task : plan.manifest.tasks) tasks.push_back(task.index);
  // Render first: a path that cannot go into the script must fail before anything is created.
  const std::vector<ArrayScript> scripts = sweep_scripts(config.job, rank_command(config.table),
                                                         notifier_executable(config.table), sweep, plan.manifest,
                                                         tasks, slurm.max_array_size());
  RunRecord record = new_run_record(config, sweep.task(0), /*resume=*/false, /*allow_runtime_change=*/false);
  // A sweep spreads over its directory (tasks/, arrays/): one that was there before keeps it all.
  const std::string created = std::filesystem::exists(sweep.path()) ? "" : sweep.path();
  std::vector<std::string> job_ids;
  try {
    create_sweep_dir(sweep, config, plan);
    if (snapshot) {
      write_code_snapshot(*snapshot, RunLayout(sweep.path()));
      record.code = snapshot->record;
    }
    for (int64_t task : tasks) save_run_record(sweep.task(task), record);
    // The first array's tasks may be promoting trials (and rewriting the manifest) before the last
    // array is submitted.
    const SweepLock lock(sweep);
    job_ids = submit_arrays(sweep, plan.manifest, scripts, "submit", slurm);
  } catch (const std::exception&) {
    std::vector<std::string> queued;
    for (const ManifestArray& array : plan.manifest.arrays) queued.push_back(array.job_id);
    abandon_submission(created, queued, slurm);
    throw;
  }
  fmt::print("submitted sweep of {} tasks as job {}\nsweep directory: {}\n", tasks.size(), fmt::join(job_ids, ", "),
             sweep.path());
}
}  // namespace

void add_submit_command(CLI::App& app) {
  auto* command = app.add_subcommand("submit", "create the run directory and submit the job to SLURM");
  struct Options {
    std::string config, run_dir;
    std::optional<std::string> after;  // given, if only as ""
    bool resume = false;
    bool forget_bad_nodes = false;
    bool no_snapshot = false;
    bool allow_runtime_change = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("config", options->config, "TOML config")->type_name(path_kind::kConfig)->required();
  command->add_option("--run-dir", options->run_dir, "run directory (default: runs/<job.name>)")->type_name(path_kind::kDirectory);
  command->add_flag("--resume", options->resume, "continue the run in an existing run directory");
  command->add_flag("--forget-bad-nodes", options->forget_bad_nodes,
                    "with --resume: let the run use again the nodes blamed for its earlier failures")
      ->needs("--resume");
  command->add_option("--after", options->after,
                      "start once RUN (a run or sweep directory, or a job id) has completed (RUN or RUN:ok), or "
                      "ended in any way (RUN:any); cancelled if it fails")
      ->type_name("RUN[:ok|:any]");
  command->add_flag("--no-snapshot", options->no_snapshot,
                    "run a [program] from its files in place instead of a copy taken now");
  command->add_flag("--allow-runtime-change", options->allow_runtime_change,
                    "with --resume: continue the run under the installed trainctl-runtime even though it was "
                    "submitted with another version")
      ->needs("--resume");
  const auto no_preflight = add_no_preflight_flag(*command);
  command->callback([options, no_preflight] {
    const Config config = load_config(options->config);
    if (!*no_preflight) preflight_data(config);
    check_memory_fits(config, !*no_preflight);
    // The job reads the webhook's URL as it is now, from the environment submit passes on or a file.
    if (config.notify) config.notify->webhook_url();
    if (config.sweep) {
      if (options->resume)
        throw UsageError("--resume continues one run; a sweep's failed tasks go again with `trainctl sweep resubmit "
                         "SWEEP --failed`");
      if (options->after)
        throw UsageError("--after waits for one job, and a sweep is submitted as job arrays that may wait for each "
                         "other; submit the sweep once its predecessor has completed");
      submit_sweep(config, chosen_run_dir(options->run_dir, config.job.name).path(), options->no_snapshot);
      return;
    }
    const RunDir run_dir = chosen_run_dir(options->run_dir, config.job.name);
    std::optional<Predecessor> predecessor;
    if (options->after) {
      predecessor = parse_predecessor(*options->after);
      refuse_predecessor_loop(*predecessor, run_dir);
    }
    RunRecord record = new_run_record(config, run_dir, options->resume, options->allow_runtime_change);
    record.after = predecessor;
    const std::optional<SnapshotPlan> snapshot = plan_snapshot(config, options->no_snapshot);
    // A resumed run keeps away from the nodes that failed it before, unless told to forget them.
    std::vector<std::string> bad_nodes;
    if (options->resume && !options->forget_bad_nodes)
      for (const BlamedNode& blamed : run_dir.blamed_nodes()) bad_nodes.push_back(blamed.node);
    // Render first: a path that cannot go into the script must fail before anything is created.
    const std::string script = batch_script(config, run_dir, bad_nodes);
    ProcessRunner runner;
    SlurmClient slurm(runner);
    // The run directory, if submit makes it; in a directory that was there before, only the config.toml
    // that would mark it a run (the rest may be the user's); nothing of a run there, resumed or refused.
    std::string created;
    if (!options->resume && !run_dir.exists())
      created = std::filesystem::exists(run_dir.path()) ? run_dir.config() : run_dir.path();
    std::string job_id;
    std::vector<std::string> queued;
    try {
      if (snapshot) {
        run_dir.prepare(run_files(frozen_config(config, *snapshot, run_dir).table, config.path, frozen_note(*snapshot)),
                        options->resume);
        write_code_snapshot(*snapshot, run_dir);
        record.code = snapshot->record;
      } else {
        run_dir.prepare(run_files(config.table, config.path), options->resume);
      }
      if (options->forget_bad_nodes) std::filesystem::remove(run_dir.bad_nodes());
      write_file_atomically(run_dir.script(), script);
      chmod(run_dir.script().c_str(), 0755);
      save_run_record(run_dir, record);
      job_id = slurm.submit(run_dir.script(), predecessor ? dependency_options(*predecessor) : std::vector<std::string>{});
      queued.push_back(job_id);
      write_file_atomically(run_dir.job_id_file(), job_id + "\n");
      if (!config.follow_ups.empty()) {
        record.followers = submit_follow_ups(config, run_dir, job_id, slurm, queued);
        save_run_record(run_dir, record);
      }
    } catch (const std::exception&) {
      abandon_submission(created, queued, slurm);
      throw;
    }
    if (!bad_nodes.empty()) fmt::print("excluding the nodes blamed before: {}\n", fmt::join(bad_nodes, ", "));
    fmt::print("submitted job {}\nrun directory: {}\n", job_id, run_dir.path());
    if (predecessor) fmt::print("waits for job {} (after{})\n", predecessor->job, predecessor->condition);
    if (record.code)
      fmt::print("code: {} files ({:.1f} MB) from {}{}\n", record.code->files,
                 static_cast<double>(record.code->bytes) / (1024 * 1024), record.code->source,
                 record.code->commit ? fmt::format(" at {}{}", record.code->commit->substr(0, 12),
                                                   record.code->dirty ? " with uncommitted changes (code.diff)" : "")
                                     : "");
    for (const Follower& follower : record.followers) fmt::print("then: {} as job {}\n", follower.kind, follower.job);
  });
}

}  // namespace trainctl

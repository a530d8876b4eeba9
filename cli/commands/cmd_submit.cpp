// trainctl submit CONFIG: creates the run directory and submits its batch script with sbatch;
// a config with [sweep] becomes a sweep directory submitted as job arrays. Its data files
// (preflight.h) and job.mem against the estimated memory (estimate/memory_estimate.h) are checked first.
#include <sys/stat.h>

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "atomic_file.h"
#include "commands.h"
#include "config_file.h"
#include "runs/run_dir.h"
#include "errors.h"
#include "estimate/memory_estimate.h"
#include "preflight.h"
#include "slurm_client.h"
#include "sweeps/sweep_submit.h"

namespace trainctl {

namespace {
void submit_sweep(const Config& config, const std::string& directory) {
  const SweepDir sweep(directory);
  SweepPlan plan = plan_sweep(config);
  ProcessRunner runner;
  SlurmClient slurm(runner);
  std::vector<int64_t> tasks;
  for (const SweepTask& task : plan.manifest.tasks) tasks.push_back(task.index);
  // Render first: a path that cannot go into the script must fail before anything is created.
  const std::vector<ArrayScript> scripts =
      sweep_scripts(config.job, rank_command(config.table), notifier_executable(config.table), sweep, tasks,
                    plan.manifest.max_parallel, slurm.max_array_size());
  create_sweep_dir(sweep, config, plan);
  const std::vector<std::string> job_ids = submit_arrays(sweep, plan.manifest, scripts, "submit", slurm);
  fmt::print("submitted sweep of {} tasks as job {}\nsweep directory: {}\n", tasks.size(), fmt::join(job_ids, ", "),
             sweep.path());
}
}  // namespace

void add_submit_command(CLI::App& app) {
  auto* command = app.add_subcommand("submit", "create the run directory and submit the job to SLURM");
  struct Options {
    std::string config, run_dir;
    bool resume = false;
    bool forget_bad_nodes = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("config", options->config, "TOML config")->type_name(path_kind::kConfig)->required();
  command->add_option("--run-dir", options->run_dir, "run directory (default: runs/<job.name>)")->type_name(path_kind::kDirectory);
  command->add_flag("--resume", options->resume, "continue the run in an existing run directory");
  command->add_flag("--forget-bad-nodes", options->forget_bad_nodes,
                    "with --resume: let the run use again the nodes blamed for its earlier failures")
      ->needs("--resume");
  const auto no_preflight = add_no_preflight_flag(*command);
  command->callback([options, no_preflight] {
    const Config config = load_config(options->config);
    if (!*no_preflight) preflight_data(config);
    check_memory_fits(config, !*no_preflight);
    if (config.sweep) {
      if (options->resume)
        throw UsageError("--resume continues one run; a sweep's failed tasks go again with `trainctl sweep resubmit "
                         "SWEEP --failed`");
      submit_sweep(config, chosen_run_dir(options->run_dir, config.job.name).path());
      return;
    }
    const RunDir run_dir = chosen_run_dir(options->run_dir, config.job.name);
    // A resumed run keeps away from the nodes that failed it before, unless told to forget them.
    std::vector<std::string> bad_nodes;
    if (options->resume && !options->forget_bad_nodes)
      for (const BlamedNode& blamed : run_dir.blamed_nodes()) bad_nodes.push_back(blamed.node);
    // Render first: a path that cannot go into the script must fail before anything is created.
    const std::string script = batch_script(config, run_dir, bad_nodes);
    run_dir.prepare(run_files(config.table, config.path), options->resume);
    if (options->forget_bad_nodes) std::filesystem::remove(run_dir.bad_nodes());
    if (!bad_nodes.empty()) fmt::print("excluding the nodes blamed before: {}\n", fmt::join(bad_nodes, ", "));
    write_file_atomically(run_dir.script(), script);
    chmod(run_dir.script().c_str(), 0755);
    ProcessRunner runner;
    std::string job_id;
    try {
      job_id = SlurmClient(runner).submit(run_dir.script());
    } catch (const std::exception&) {
      // A new run that SLURM refused (a request no node can meet, say) leaves nothing behind, so
      // the corrected config submits as a new run again; a resumed run keeps its directory.
      if (!options->resume) std::filesystem::remove_all(run_dir.path());
      throw;
    }
    write_file_atomically(run_dir.job_id_file(), job_id + "\n");
    fmt::print("submitted job {}\nrun directory: {}\n", job_id, run_dir.path());
  });
}

}  // namespace trainctl

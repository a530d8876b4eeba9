// trainctl render CONFIG [-o FILE]: prints the batch script submit would write; no side effects.
// A config whose job.mem cannot hold its estimated memory is refused, as submit refuses it.
// For a sweep: every array's script, and the task list (with a schedule, its rungs and budget) on stderr.
#include <fstream>

#include <fmt/format.h>

#include "commands.h"
#include "config_file.h"
#include "errors.h"
#include "estimate/memory_estimate.h"
#include "render.h"
#include "runs/run_dir.h"
#include "slurm_client.h"
#include "sweeps/sweep_schedule.h"
#include "sweeps/sweep_submit.h"

namespace trainctl {

std::string batch_script(const Config& config, const RunDir& run_dir, const std::vector<std::string>& excluded_nodes) {
  return render_batch_script(config.job, {run_dir.path(), rank_command(config.table), std::nullopt, excluded_nodes,
                                          notifier_executable(config.table)});
}

namespace {
// The sweep's scripts, split at the cluster's MaxArraySize when SLURM answers, else at SLURM's
// default; the task list goes to stderr so that stdout stays the scripts.
std::string sweep_preview(const Config& config, const std::string& directory) {
  const SweepPlan plan = plan_sweep(config);
  int64_t max_array_size = kSlurmDefaultMaxArraySize;
  try {
    ProcessRunner runner;
    max_array_size = SlurmClient(runner).max_array_size();
  } catch (const SlurmError&) {
    fmt::print(stderr, "note: SLURM is not reachable; splitting at its default MaxArraySize ({})\n", max_array_size);
  }
  std::vector<int64_t> tasks;
  for (const SweepTask& task : plan.manifest.tasks) {
    tasks.push_back(task.index);
    fmt::print(stderr, "task {}: {}\n", task.index, describe_task(plan.manifest.parameters, task.values));
  }
  if (config.sweep->schedule)
    fmt::print(stderr, "{}", schedule_summary(*config.sweep->schedule, static_cast<int64_t>(tasks.size()), config.job));
  const std::vector<ArrayScript> scripts = sweep_scripts(config.job, rank_command(config.table),
                                                         notifier_executable(config.table), SweepDir(directory),
                                                         plan.manifest, tasks, max_array_size);
  std::string text;
  for (size_t k = 0; k < scripts.size(); ++k) {
    if (scripts.size() > 1)
      text += fmt::format("{}# ---- array {} of {}: tasks {}..{} ----\n", k == 0 ? "" : "\n", k + 1, scripts.size(),
                          scripts[k].tasks.front(), scripts[k].tasks.back());
    text += scripts[k].text;
  }
  return text;
}
}  // namespace

void add_render_command(CLI::App& app) {
  auto* command = app.add_subcommand("render", "print the sbatch script that submit would submit");
  struct Options {
    std::string config, output, run_dir;
  };
  auto options = std::make_shared<Options>();
  command->add_option("config", options->config, "TOML config")->type_name(path_kind::kConfig)->required();
  command->add_option("-o,--output", options->output, "write the script to FILE instead of stdout")->type_name(path_kind::kFile);
  command->add_option("--run-dir", options->run_dir, "run directory (default: runs/<job.name>)")->type_name(path_kind::kDirectory);
  command->callback([options] {
    const Config config = load_config(options->config);
    // What submit would refuse has no script to show. Render opens no data files: the estimate
    // counts one batch of the data, not the files.
    check_memory_fits(config, false);
    const RunDir run_dir = chosen_run_dir(options->run_dir, config.job.name);
    const std::string script = config.sweep ? sweep_preview(config, run_dir.path()) : batch_script(config, run_dir);
    if (options->output.empty()) {
      fmt::print("{}", script);
      return;
    }
    std::ofstream out(options->output);
    if (!(out << script)) throw UsageError(fmt::format("cannot write {}", options->output));
  });
}

}  // namespace trainctl

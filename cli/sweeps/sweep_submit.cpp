// Submitting a sweep: see sweep_submit.h.
#include "sweeps/sweep_submit.h"

#include <sys/stat.h>

#include <ctime>
#include <filesystem>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "atomic_file.h"
#include "commands.h"
#include "config_reader.h"
#include "errors.h"
#include "job_array.h"
#include "render.h"

namespace trainctl {

namespace fs = std::filesystem;

namespace {
ConfigCheck check_sweep_task(const Config& config) {
  return [&config](const toml::table& table) { check_config_table(table, config.path); };
}
}  // namespace

SweepPlan plan_sweep(const Config& config) {
  const SweepSpec& sweep = *config.sweep;
  SweepPlan plan;
  SweepManifest& manifest = plan.manifest;
  manifest.name = config.job.name;
  manifest.config = fs::absolute(config.path).string();
  manifest.parameters = sweep.paths();
  manifest.samples = sweep.samples;
  manifest.seed = static_cast<int64_t>(sweep.seed);
  manifest.max_parallel = sweep.max_parallel;
  manifest.schedule = sweep.schedule;
  manifest.tasks = expand_sweep(sweep);
  plan.task_files.reserve(manifest.tasks.size());
  for_each_task_config(config.table, sweep, manifest.tasks, check_sweep_task(config),
                       [&](const SweepTask& task, toml::table& table) {
                         const std::string note = fmt::format("task {} of sweep \"{}\": {}", task.index, manifest.name,
                                                              describe_task(manifest.parameters, task.values));
                         plan.task_files.push_back(run_files(table, config.path, note));
                       });
  return plan;
}

size_t check_sweep_tasks(const Config& config) {
  const std::vector<SweepTask> tasks = expand_sweep(*config.sweep);
  for_each_task_config(config.table, *config.sweep, tasks, check_sweep_task(config), [](const SweepTask&, toml::table&) {});
  return tasks.size();
}

std::vector<ArrayScript> sweep_scripts(const JobSpec& job, const RankCommand& rank,
                                       const std::optional<std::string>& notifier, const SweepDir& sweep,
                                       const SweepManifest& manifest, const std::vector<int64_t>& tasks,
                                       int64_t max_array_size) {
  std::optional<std::string> scheduler;
  if (manifest.schedule) scheduler = trainctl_executable();
  std::vector<ArrayScript> scripts;
  for (std::vector<int64_t>& array : split_into_arrays(tasks, max_array_size)) {
    std::string text =
        render_batch_script(job, {sweep.path(), rank, ArrayTasks{array, manifest.max_parallel, scheduler}, {}, notifier});
    scripts.push_back({std::move(array), std::move(text)});
  }
  return scripts;
}

void create_sweep_dir(const SweepDir& sweep, const Config& config, const SweepPlan& plan) {
  if (sweep.exists())
    throw UsageError(fmt::format("{} already holds a sweep; resubmit its failed tasks with `trainctl sweep resubmit {} "
                                 "--failed`, or choose another --run-dir",
                                 sweep.path(), sweep.path()));
  fs::create_directories(sweep.logs());
  fs::create_directories(sweep.path() + "/arrays");
  for (size_t i = 0; i < plan.task_files.size(); ++i)
    sweep.task(static_cast<int64_t>(i)).prepare(plan.task_files[i], /*resume=*/false, RunDir::Durability::kCallerSyncs);
  // The config as written, readable by its owner alone when it holds a webhook's secret URL.
  write_file_atomically(sweep.config(), read_config_text(config.path),
                        holds_webhook_secret(config.table) ? kOwnerOnlyFile : kSharedFile);
  sync_filesystem(sweep.path());
  write_manifest(sweep, plan.manifest);
}

std::vector<std::string> submit_arrays(const SweepDir& sweep, SweepManifest& manifest,
                                       const std::vector<ArrayScript>& scripts, const std::string& reason,
                                       SlurmClient& slurm, const std::string& after) {
  std::vector<std::string> job_ids;
  for (const ArrayScript& script : scripts) {
    ManifestArray array;
    array.tasks = script.tasks;
    array.reason = reason;
    const std::string script_path = sweep.array_script(manifest.arrays.size());
    array.script = fs::path(script_path).lexically_relative(sweep.path()).string();
    write_file_atomically(script_path, script.text);
    chmod(script_path.c_str(), 0755);
    std::vector<std::string> options;
    if (manifest.max_parallel && (!job_ids.empty() || !after.empty())) {
      array.after = job_ids.empty() ? after : job_ids.back();
      options.push_back("--dependency=afterany:" + array.after);
    }
    array.submitted = fmt::format("{:%FT%TZ}", fmt::gmtime(std::time(nullptr)));
    array.job_id = slurm.submit(script_path, options);
    job_ids.push_back(array.job_id);
    manifest.arrays.push_back(std::move(array));
    write_manifest(sweep, manifest);
  }
  return job_ids;
}

std::vector<std::string> resubmit_tasks(const SweepDir& sweep, SweepManifest& manifest,
                                        const std::vector<int64_t>& tasks, const std::string& reason,
                                        SlurmClient& slurm, const std::string& after) {
  const toml::table config = parse_config_file(sweep.config());
  const std::vector<ArrayScript> scripts =
      sweep_scripts(parse_job_spec(config, sweep.config()), rank_command(config), notifier_executable(config), sweep,
                    manifest, tasks, slurm.max_array_size());
  return submit_arrays(sweep, manifest, scripts, reason, slurm, after);
}

}  // namespace trainctl

// trainctl sweep status SWEEP | sweep resubmit SWEEP --failed: a submitted sweep's results
// table, and a second chance for its failed or cancelled tasks.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "config_reader.h"
#include "errors.h"
#include "loss_plot.h"
#include "sweeps/sweep_status.h"
#include "sweeps/sweep_submit.h"

namespace trainctl {

namespace {

const std::map<std::string, RankMetric> kRankMetrics{
    {"best_val_loss", RankMetric::kBestValLoss}, {"loss", RankMetric::kLoss}, {"task", RankMetric::kTask}};

std::string metric_name(RankMetric metric) {
  for (const auto& [name, value] : kRankMetrics)
    if (value == metric) return name;
  return "";
}

std::string loss_text(const std::optional<double>& value) { return value ? fmt::format("{:.4f}", *value) : "-"; }

void print_table(const SweepDir& sweep, const SweepManifest& manifest, const std::vector<TaskStatus>& ranked,
                 RankMetric metric) {
  std::map<std::string, int> counts;
  for (const TaskStatus& status : ranked) ++counts[status.run.state];
  std::vector<std::string> tally;
  for (const auto& [state, count] : counts) tally.push_back(fmt::format("{} {}", count, state));
  const std::vector<std::string> job_ids = array_job_ids(manifest);
  fmt::print("sweep \"{}\" in {}: {} tasks ({}); arrays: {}; ranked by {}\n", manifest.name, sweep.path(),
             manifest.tasks.size(), fmt::join(tally, ", "), job_ids.empty() ? "none" : fmt::format("{}", fmt::join(job_ids, ", ")),
             metric_name(metric));

  std::vector<std::string> header{"TASK"};
  header.insert(header.end(), manifest.parameters.begin(), manifest.parameters.end());
  header.insert(header.end(), {"STATE", "REQUEUES", "STEP", "LOSS", "BEST_VAL", "NOTE"});
  std::vector<std::vector<std::string>> rows{header};
  const bool has_best = !ranked.empty() && metric != RankMetric::kTask && metric_of(ranked.front(), metric);
  for (const TaskStatus& status : ranked) {
    const RunStatus& run = status.run;
    const bool best = has_best && &status == &ranked.front();
    std::vector<std::string> row{fmt::format("{}{}", best ? "*" : " ", status.task)};
    for (const toml::node& value : manifest.tasks[static_cast<size_t>(status.task)].values)
      row.push_back(describe_value(value));
    row.insert(row.end(), {run.state, std::to_string(run.restarts), run.step ? std::to_string(*run.step) : "-",
                           loss_text(run.loss), loss_text(run.best_val_loss), status_note(run)});
    rows.push_back(std::move(row));
  }
  std::vector<size_t> widths(header.size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c + 1 < row.size(); ++c) line += fmt::format("{:<{}}  ", row[c], widths[c]);
    line += row.back();
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", printable(line));  // a task's outcome may hold control characters
  }
  if (has_best)
    fmt::print("best (*): task {}, {} {:.6g}: {}\n", ranked.front().task, metric_name(metric),
               *metric_of(ranked.front(), metric),
               describe_task(manifest.parameters, manifest.tasks[static_cast<size_t>(ranked.front().task)].values));
}

void add_status_subcommand(CLI::App& sweep_command) {
  auto* command = sweep_command.add_subcommand("status", "one row per task: parameters, state, requeues, step, losses");
  struct Options {
    std::string sweep;
    std::string sort;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("sweep", options->sweep, "sweep directory")->type_name(path_kind::kDirectory)->required();
  command->add_option("--sort", options->sort, "rank by best_val_loss, loss or task (default: best_val_loss when "
                                               "any task has validated, else loss)")
      ->check(CLI::IsMember({"best_val_loss", "loss", "task"}));
  command->add_flag("--json", options->json, "print a JSON array, best first, instead of a table");
  command->callback([options] {
    const SweepDir sweep(options->sweep);
    const SweepManifest manifest = read_manifest(sweep);
    ProcessRunner runner;
    SlurmClient slurm(runner);
    std::optional<std::vector<ArrayTaskInfo>> queued;
    try {
      queued = slurm.array_tasks(array_job_ids(manifest));
    } catch (const SlurmError&) {
      // The table still shows what the run directories know.
    }
    std::vector<TaskStatus> statuses = read_sweep_status(sweep, manifest, queued);
    const RankMetric metric = options->sort.empty() ? default_rank_metric(statuses) : kRankMetrics.at(options->sort);
    rank_tasks(statuses, metric);
    if (options->json) {
      fmt::print("{}", sweep_status_json(manifest, statuses, metric));
    } else {
      print_table(sweep, manifest, statuses, metric);
      fmt::print("{}\n", loss_plot_hint(options->sweep));
    }
  });
}

void add_resubmit_subcommand(CLI::App& sweep_command) {
  auto* command = sweep_command.add_subcommand("resubmit", "submit the failed or cancelled tasks again, as a new array");
  struct Options {
    std::string sweep;
    bool failed = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("sweep", options->sweep, "sweep directory")->type_name(path_kind::kDirectory)->required();
  command->add_flag("--failed", options->failed, "the tasks that are neither queued, running nor completed")->required();
  command->callback([options] {
    const SweepDir sweep(options->sweep);
    SweepManifest manifest = read_manifest(sweep);
    ProcessRunner runner;
    SlurmClient slurm(runner);
    // Without SLURM's answer a running task would look like one to resubmit: the error ends it.
    const std::vector<ArrayTaskInfo> queued = slurm.array_tasks(array_job_ids(manifest));
    std::vector<int64_t> tasks;
    for (const TaskStatus& status : read_sweep_status(sweep, manifest, queued))
      if (needs_resubmission(status)) tasks.push_back(status.task);
    if (tasks.empty()) {
      fmt::print("nothing to resubmit: every task of {} is completed, queued or running\n", sweep.path());
      return;
    }
    // Checkpoints stay: each task resumes from its last valid one.
    for (int64_t task : tasks) sweep.task(task).reset_submission_record();
    const toml::table config = parse_config_file(sweep.config());
    const std::vector<ArrayScript> scripts =
        sweep_scripts(parse_job_spec(config, sweep.config()), rank_command(config), notifier_executable(config), sweep,
                      tasks, manifest.max_parallel, slurm.max_array_size());
    const std::vector<std::string> job_ids = submit_arrays(sweep, manifest, scripts, "resubmit --failed", slurm);
    fmt::print("resubmitted {} task(s) ({}) as job {}\n", tasks.size(), fmt::join(tasks, ", "), fmt::join(job_ids, ", "));
  });
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto* command = app.add_subcommand("sweep", "inspect and resubmit a sweep (a config with [sweep], submitted)");
  command->require_subcommand(1);
  add_status_subcommand(*command);
  add_resubmit_subcommand(*command);
}

}  // namespace trainctl

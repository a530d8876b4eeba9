// trainctl sweep status SWEEP | sweep resubmit SWEEP --failed | sweep rung SWEEP --task T: a
// submitted sweep's results table, a second chance for its failed or cancelled tasks, and a
// scheduled trial's step at its rungs, which its batch script takes.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "config_reader.h"
#include "errors.h"
#include "loss_plot.h"
#include "sweeps/rung_log.h"
#include "sweeps/rung_step.h"
#include "sweeps/sweep_status.h"
#include "sweeps/sweep_submit.h"

namespace trainctl {

namespace {

const std::map<std::string, RankMetric> kRankMetrics{{"best_val_loss", RankMetric::kBestValLoss},
                                                     {"loss", RankMetric::kLoss},
                                                     {"task", RankMetric::kTask},
                                                     {"rung", RankMetric::kRung}};

std::string metric_name(RankMetric metric) {
  for (const auto& [name, value] : kRankMetrics)
    if (value == metric) return name;
  return "";
}

std::string loss_text(const std::optional<double>& value) { return value ? fmt::format("{:.4f}", *value) : "-"; }

// Rows of cells in columns as wide as their widest cell, two spaces apart, no trailing blanks.
void print_rows(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c + 1 < row.size(); ++c) line += fmt::format("{:<{}}  ", row[c], widths[c]);
    line += row.back();
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", printable(line));  // a task's outcome may hold control characters
  }
}

// A task's state as the table shows it: a scheduled trial's, or its run's.
std::string shown_state(const SweepManifest& manifest, const TaskStatus& status) {
  return manifest.schedule ? trial_state(status, *manifest.schedule) : status.run.state;
}

// The cells of a scheduled trial's rungs: the metric at each it reached, "-" beyond.
std::vector<std::string> rung_cells(const SweepSchedule& schedule, const TaskStatus& status) {
  std::vector<std::string> cells;
  for (size_t rung = 0; rung < schedule.rungs.size(); ++rung) {
    const std::vector<TrialRung>& reached = status.rungs->reached;
    cells.push_back(rung < reached.size() ? fmt::format("{:.4f}", reached[rung].value) : "-");
  }
  return cells;
}

// Below a scheduled sweep's table, however it is sorted: the best trial at the highest rung
// reached, and the steps trained against the full grid's.
void print_schedule_summary(const SweepManifest& manifest, std::vector<TaskStatus> statuses) {
  const SweepSchedule& schedule = *manifest.schedule;
  rank_tasks(statuses, RankMetric::kRung, schedule.maximize);
  if (!statuses.empty() && metric_of(statuses.front(), RankMetric::kRung)) {
    const TaskStatus& best = statuses.front();
    const size_t rung = best.rungs->reached.size() - 1;
    fmt::print("best so far: task {} at rung {} (step {}), {} {:.6g}: {}\n", best.task, rung, schedule.rungs[rung],
               schedule.metric, best.rungs->reached[rung].value,
               describe_task(manifest.parameters, manifest.tasks[static_cast<size_t>(best.task)].values));
  }
  int64_t trained = 0;
  for (const TaskStatus& status : statuses) trained += trial_steps(status, schedule);
  const int64_t grid = static_cast<int64_t>(manifest.tasks.size()) * schedule.rungs.back();
  fmt::print("steps: {} trained, {:.1f}% of the full grid's {} ({} trials x {} steps)\n", trained,
             100.0 * static_cast<double>(trained) / static_cast<double>(grid), grid, manifest.tasks.size(),
             schedule.rungs.back());
}

void print_table(const SweepDir& sweep, const SweepManifest& manifest, const std::vector<TaskStatus>& ranked,
                 RankMetric metric) {
  std::map<std::string, int> counts;
  for (const TaskStatus& status : ranked) ++counts[shown_state(manifest, status)];
  std::vector<std::string> tally;
  for (const auto& [state, count] : counts) tally.push_back(fmt::format("{} {}", count, state));
  const std::vector<std::string> job_ids = array_job_ids(manifest);
  fmt::print("sweep \"{}\" in {}: {} tasks ({}); arrays: {}; ranked by {}\n", manifest.name, sweep.path(),
             manifest.tasks.size(), fmt::join(tally, ", "), job_ids.empty() ? "none" : fmt::format("{}", fmt::join(job_ids, ", ")),
             metric_name(metric));
  const std::optional<SweepSchedule>& schedule = manifest.schedule;
  if (schedule)
    fmt::print("schedule: {} on {} ({}), reduction_factor {}, rungs at steps {}\n", schedule->kind_name(),
               schedule->metric, schedule->mode_name(), schedule->reduction_factor, fmt::join(schedule->rungs, ", "));

  std::vector<std::string> header{"TASK"};
  header.insert(header.end(), manifest.parameters.begin(), manifest.parameters.end());
  header.insert(header.end(), {"STATE", "REQUEUES", "STEP"});
  if (schedule)
    for (int64_t step : schedule->rungs) header.push_back(fmt::format("{}@{}", schedule->metric, step));
  else
    header.insert(header.end(), {"LOSS", "BEST_VAL"});
  header.push_back("NOTE");
  std::vector<std::vector<std::string>> rows{header};
  const bool has_best = !ranked.empty() && metric != RankMetric::kTask && metric_of(ranked.front(), metric);
  for (const TaskStatus& status : ranked) {
    const RunStatus& run = status.run;
    const bool best = has_best && &status == &ranked.front();
    std::vector<std::string> row{fmt::format("{}{}", best ? "*" : " ", status.task)};
    for (const toml::node& value : manifest.tasks[static_cast<size_t>(status.task)].values)
      row.push_back(describe_value(value));
    row.insert(row.end(), {shown_state(manifest, status), std::to_string(run.restarts),
                           run.step ? std::to_string(*run.step) : "-"});
    if (schedule) {
      const std::vector<std::string> cells = rung_cells(*schedule, status);
      row.insert(row.end(), cells.begin(), cells.end());
    } else {
      row.insert(row.end(), {loss_text(run.loss), loss_text(run.best_val_loss)});
    }
    row.push_back(status_note(run));
    rows.push_back(std::move(row));
  }
  print_rows(rows);
  if (schedule) {
    print_schedule_summary(manifest, ranked);
    return;
  }
  if (has_best)
    fmt::print("best (*): task {}, {} {:.6g}: {}\n", ranked.front().task, metric_name(metric),
               *metric_of(ranked.front(), metric),
               describe_task(manifest.parameters, manifest.tasks[static_cast<size_t>(ranked.front().task)].values));
}

void add_status_subcommand(CLI::App& sweep_command) {
  auto* command = sweep_command.add_subcommand(
      "status", "one row per task: parameters, state, requeues, step, losses (with a schedule, the metric at each rung)");
  struct Options {
    std::string sweep;
    std::string sort;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("sweep", options->sweep, "sweep directory")->type_name(path_kind::kDirectory)->required();
  command->add_option("--sort", options->sort, "rank by rung, best_val_loss, loss or task (default: rung for a sweep "
                                               "with [sweep.schedule], else best_val_loss when any task has "
                                               "validated, else loss)")
      ->check(CLI::IsMember({"rung", "best_val_loss", "loss", "task"}));
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
    rank_tasks(statuses, metric, manifest.schedule && manifest.schedule->maximize);
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
    // A scheduled sweep's running tasks may be promoting trials (and rewriting the manifest).
    const SweepLock lock(sweep);
    SweepManifest manifest = read_manifest(sweep);
    ProcessRunner runner;
    SlurmClient slurm(runner);
    // Without SLURM's answer a running task would look like one to resubmit: the error ends it.
    const std::vector<ArrayTaskInfo> queued = slurm.array_tasks(array_job_ids(manifest));
    const std::vector<TaskStatus> statuses = read_sweep_status(sweep, manifest, queued);
    std::vector<int64_t> tasks;
    for (const TaskStatus& status : statuses)
      if (needs_resubmission(status)) tasks.push_back(status.task);
    if (manifest.schedule) {
      std::vector<TrialRungs> decided;
      for (const TaskStatus& status : statuses) decided.push_back(*status.rungs);
      for (int64_t trial : unsubmitted_promotions(sweep, decided, manifest.schedule->rungs.size()))
        tasks.push_back(trial);
      std::sort(tasks.begin(), tasks.end());
    }
    if (tasks.empty()) {
      fmt::print("nothing to resubmit: every task of {} is completed, {}queued or running\n", sweep.path(),
                 manifest.schedule ? "stopped at a rung, " : "");
      return;
    }
    // Checkpoints stay: each task resumes from its last valid one.
    for (int64_t task : tasks) sweep.task(task).reset_submission_record();
    const std::vector<std::string> job_ids = resubmit_tasks(sweep, manifest, tasks, "resubmit --failed", slurm);
    fmt::print("resubmitted {} task(s) ({}) as job {}\n", tasks.size(), fmt::join(tasks, ", "), fmt::join(job_ids, ", "));
  });
}

void add_rung_subcommand(CLI::App& sweep_command) {
  auto* command = sweep_command.add_subcommand(
      "rung", "a scheduled trial's step at its rungs, which its batch script takes: record, decide, answer");
  struct Options {
    std::string sweep;
    int64_t task = 0;
    std::optional<int64_t> reached;
    bool ranks_failed = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("sweep", options->sweep, "sweep directory")->type_name(path_kind::kDirectory)->required();
  command->add_option("--task", options->task, "the trial's task index")->required()->check(CLI::NonNegativeNumber);
  auto* reached = command->add_option("--reached", options->reached, "the ranks ended well at this step budget")
                      ->type_name("STEP")
                      ->check(CLI::PositiveNumber);
  command->add_flag("--ranks-failed", options->ranks_failed, "the ranks failed: stop the trial if its metric went non-finite")
      ->excludes(reached);
  command->callback([options] {
    ProcessRunner runner;
    SlurmClient slurm(runner);
    const RungEvent event = options->reached  ? RungEvent::kReached
                            : options->ranks_failed ? RungEvent::kRanksFailed
                                                    : RungEvent::kStart;
    fmt::print("{}\n", take_rung_step(SweepDir(options->sweep), options->task, event, options->reached.value_or(0), slurm)
                           .line());
  });
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto* command = app.add_subcommand("sweep", "inspect and resubmit a sweep (a config with [sweep], submitted)");
  command->require_subcommand(1);
  add_status_subcommand(*command);
  add_resubmit_subcommand(*command);
  add_rung_subcommand(*command);
}

}  // namespace trainctl

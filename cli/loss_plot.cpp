// The charts of `trainctl plot`: see loss_plot.h.
#include "loss_plot.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "errors.h"
#include "metrics_file.h"
#include "sweeps/sweep_status.h"

namespace trainctl {

namespace {

constexpr const char* kPlotFile = "loss.png";
// The legend's key to the line styles of a sweep, in a colour no task has.
constexpr Rgb kKeyColor{0.45, 0.45, 0.45};

const LineStyle kTrainLoss{palette_color(0), 1.5};
const LineStyle kValLoss{palette_color(1), 1.5, /*dashed=*/true, /*markers=*/true};
const LineStyle kLearningRate{palette_color(2), 1.2};

std::vector<Point> points_of(const std::map<int64_t, double>& by_step) {
  std::vector<Point> points;
  points.reserve(by_step.size());
  for (const auto& [step, value] : by_step) points.push_back({static_cast<double>(step), value});
  return points;
}

}  // namespace

std::string default_loss_plot(const std::string& dir) { return (std::filesystem::path(dir) / kPlotFile).string(); }

std::string loss_plot_hint(const std::string& dir) {
  return fmt::format("plot: trainctl plot {}  (writes {})", dir, default_loss_plot(dir));
}

MetricsHistory read_metrics_history(const RunDir& run) {
  MetricsHistory history;
  for (const MetricsLine& line : read_metrics_file(run.metrics())) {
    if (line.event) continue;
    if (line.train && std::isfinite(line.train->loss)) history.loss[line.step] = line.train->loss;
    if (line.train && std::isfinite(line.train->lr)) history.lr[line.step] = line.train->lr;
    if (line.eval && std::isfinite(line.eval->val_loss)) history.val_loss[line.step] = line.eval->val_loss;
  }
  return history;
}

LineChart run_loss_chart(const RunDir& run, const std::string& name) {
  const MetricsHistory history = read_metrics_history(run);
  if (!history.has_loss())
    throw UsageError(fmt::format("{} has logged no loss yet (no step or validation line in {})", name, run.metrics()));
  LineChart chart{name, "step", "loss", "learning rate", {}, {}};
  const auto add = [&](const std::map<int64_t, double>& values, const LineStyle& style, YAxis axis,
                       const std::string& name) {
    if (values.empty()) return;
    chart.series.push_back(Series{points_of(values), style, axis, false});
    chart.legend.push_back(LegendEntry{name, style, false});
  };
  add(history.loss, kTrainLoss, YAxis::kLeft, "training loss");
  add(history.val_loss, kValLoss, YAxis::kLeft, "validation loss");
  add(history.lr, kLearningRate, YAxis::kRight, "learning rate (right)");
  return chart;
}

namespace {
// A scheduled sweep: each trial's metric against its steps, every value it logged; the rungs as
// dashed vertical lines; the best trial (at the highest rung) highlighted, the stopped ones faint.
LineChart sweep_rung_chart(const SweepDir& sweep, const SweepManifest& manifest, const std::string& name) {
  const SweepSchedule& schedule = *manifest.schedule;
  std::vector<TaskStatus> ranked = read_sweep_status(sweep, manifest, std::nullopt);
  rank_tasks(ranked, RankMetric::kRung, schedule.maximize);
  const bool has_best = !ranked.empty() && metric_of(ranked.front(), RankMetric::kRung);
  LineChart chart{"", "step", schedule.metric, "", {}, {}};
  double low = INFINITY, high = -INFINITY;
  for (const TaskStatus& status : ranked) {
    std::map<int64_t, double> values;  // the last value logged at each step
    for (const LoggedValue& logged : read_logged_values(sweep.task(status.task).metrics(), schedule.metric))
      if (std::isfinite(logged.value)) values[logged.step] = logged.value;
    if (values.empty()) continue;
    for (const auto& [step, value] : values) {
      low = std::min(low, value);
      high = std::max(high, value);
    }
    const bool best = has_best && &status == &ranked.front();
    const size_t reached = status.rungs->reached.size();
    const bool stopped = reached < schedule.rungs.size() && !next_rung(*status.rungs, schedule.rungs.size());
    const LineStyle style{palette_color(static_cast<size_t>(status.task)), 1.0, false, true};
    chart.series.push_back(Series{points_of(values), style, YAxis::kLeft, best, stopped});
    chart.legend.push_back(LegendEntry{
        fmt::format("task {}{}: {}", status.task,
                    best ? " (best)" : stopped ? fmt::format(" (stopped at rung {})", reached - 1) : "",
                    describe_task(manifest.parameters, manifest.tasks[static_cast<size_t>(status.task)].values)),
        LineStyle{style.color, 2.0}, best});
  }
  if (chart.series.empty()) throw UsageError(fmt::format("no trial of {} has logged {} yet", name, schedule.metric));
  const LineStyle rung_style{kKeyColor, 1.0, /*dashed=*/true};
  for (int64_t step : schedule.rungs)
    chart.series.push_back(Series{{{static_cast<double>(step), low}, {static_cast<double>(step), high}}, rung_style});
  chart.legend.insert(chart.legend.begin(),
                      LegendEntry{fmt::format("rungs (steps {})", fmt::join(schedule.rungs, ", ")), rung_style, false});
  chart.title = fmt::format("{}: {} on {}, {} trials", name, schedule.kind_name(), schedule.metric, ranked.size());
  if (has_best) {
    const size_t rung = ranked.front().rungs->reached.size() - 1;
    chart.title += fmt::format("; best: task {}, {:.4g} at step {}", ranked.front().task,
                               ranked.front().rungs->reached[rung].value, schedule.rungs[rung]);
  }
  return chart;
}
}  // namespace

LineChart sweep_loss_chart(const SweepDir& sweep, const std::string& name) {
  const SweepManifest manifest = read_manifest(sweep);
  if (manifest.schedule) return sweep_rung_chart(sweep, manifest, name);
  // Ranked as `sweep status` ranks them; that needs only the run directories, not SLURM.
  std::vector<TaskStatus> ranked = read_sweep_status(sweep, manifest, std::nullopt);
  const RankMetric metric = default_rank_metric(ranked);
  rank_tasks(ranked, metric);
  const bool has_best = !ranked.empty() && metric_of(ranked.front(), metric);

  LineChart chart{"", "step", "loss", "", {}, {}};
  chart.legend.push_back(LegendEntry{"training loss", LineStyle{kKeyColor, 1.0}, false});
  chart.legend.push_back(LegendEntry{"validation loss", LineStyle{kKeyColor, 1.0, true, true}, false});
  size_t plotted = 0;
  for (const TaskStatus& status : ranked) {
    const MetricsHistory history = read_metrics_history(sweep.task(status.task));
    if (!history.has_loss()) continue;
    ++plotted;
    const bool best = has_best && &status == &ranked.front();
    // By task index, so that a task keeps its colour from one plot to the next.
    const Rgb color = palette_color(static_cast<size_t>(status.task));
    chart.series.push_back(Series{points_of(history.loss), LineStyle{color, 1.0}, YAxis::kLeft, best});
    chart.series.push_back(Series{points_of(history.val_loss), LineStyle{color, 1.0, true, true}, YAxis::kLeft, best});
    chart.legend.push_back(LegendEntry{
        fmt::format("task {}{}: {}", status.task, best ? " (best)" : "",
                    describe_task(manifest.parameters, manifest.tasks[static_cast<size_t>(status.task)].values)),
        LineStyle{color, 2.0}, best});
  }
  if (plotted == 0) throw UsageError(fmt::format("no task of {} has logged a loss yet", name));
  const std::string tasks = plotted == manifest.tasks.size()
                                ? fmt::format("{} tasks", plotted)
                                : fmt::format("{} of {} tasks have logged a loss", plotted, manifest.tasks.size());
  chart.title = has_best
                    ? fmt::format("{}: {}; best: task {}, {} {:.4g}", name, tasks, ranked.front().task,
                                  metric == RankMetric::kBestValLoss ? "best validation loss" : "last training loss",
                                  *metric_of(ranked.front(), metric))
                    : fmt::format("{}: {}", name, tasks);
  return chart;
}

}  // namespace trainctl

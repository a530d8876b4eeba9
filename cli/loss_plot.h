// The charts of `trainctl plot`: a run's training and validation loss with its learning rate on
// a second axis, or a sweep's tasks overlaid with the best one (as `sweep status` ranks them)
// highlighted and each task's swept parameters in the legend; for a sweep with [sweep.schedule],
// each trial's metric with the rungs marked and the trials stopped at one faint.
// plot/line_chart.h draws them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "line_chart.h"
#include "runs/run_dir.h"
#include "sweeps/sweep_dir.h"

namespace trainctl {

// Where `trainctl plot DIR` writes unless told otherwise: DIR/loss.png.
std::string default_loss_plot(const std::string& dir);
// The line `status` and `sweep status` end with: the command that draws DIR's plot, and where it goes.
std::string loss_plot_hint(const std::string& dir);

// A run's metrics.jsonl by step, across requeues. A run resumed from a checkpoint logs the steps
// after it again, and the last value logged for a step is the one training went on from.
struct MetricsHistory {
  std::map<int64_t, double> loss;
  std::map<int64_t, double> lr;
  std::map<int64_t, double> val_loss;
  bool has_loss() const { return !loss.empty() || !val_loss.empty(); }
};
MetricsHistory read_metrics_history(const RunDir& run);

// Titled with `name`, the directory as the user named it. Throw UsageError when the run, or
// every task of the sweep, has logged no loss (or a scheduled sweep's metric) yet.
LineChart run_loss_chart(const RunDir& run, const std::string& name);
LineChart sweep_loss_chart(const SweepDir& sweep, const std::string& name);

}  // namespace trainctl

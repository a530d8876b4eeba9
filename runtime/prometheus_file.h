// The Prometheus textfile of a run ([metrics] prometheus): the last logged step's metrics, the
// latest validation loss and the requeue count, as gauges in the text exposition format that
// node_exporter's textfile collector reads. Metrics (metrics.h) renders it here and rewrites the
// file atomically, so that a scrape never reads half of it.
#pragma once

#include <cstdint>
#include <string>

#include "run_layout.h"

namespace trainctl {

struct StepRecord;

// Where the file goes, and what it says about the job: the same at every step of a run.
struct PrometheusFile {
  std::string path;
  std::string job;       // label: $SLURM_JOB_ID, else the run directory's name
  std::string run;       // label: the run directory's name
  std::string host;      // label: the host of rank 0, which writes the file
  int64_t requeues = 0;  // $SLURM_RESTART_COUNT, 0 until the first requeue
};

// The file of this process, as rank 0 of the run in `layout`. `configured_path` ([metrics]
// prometheus) is relative to the run directory unless absolute. Throws BadInput when
// SLURM_RESTART_COUNT is set but not a count.
PrometheusFile prometheus_file_of_run(const RunLayout& layout, const std::string& configured_path);

// The file's text: a gauge for each known value of `step` and for `val_loss` (NaN before the
// first evaluation), named trainctl_*; a non-finite value, or a peak memory of 0, is unknown and
// left out. Throughput is trainctl_<step.term_unit>_per_second ("samples" or "tokens").
std::string prometheus_text(const PrometheusFile& file, const StepRecord& step, double val_loss);

}  // namespace trainctl

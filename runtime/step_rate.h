// The rate of the steps since the last logged one and the model FLOPs utilisation it reaches:
// what a logged step reports besides its loss. The window restarts after each log, so that a
// slow stretch (a save, an evaluation) shows in the next line rather than averaged away.
#pragma once

#include <chrono>
#include <cstdint>

#include "metrics_file.h"

namespace trainctl {

class StepRate {
 public:
  using Clock = std::chrono::steady_clock;

  // terms_per_step: the loss terms of one step over all ranks; flops_per_term: the model's
  // training FLOPs per term; peak_flops: one device's dense peak (not above 0: unknown, and so is
  // the MFU), `devices` of them.
  StepRate(int64_t terms_per_step, double flops_per_term, double peak_flops, int devices);

  void restart(Clock::time_point now);
  void count_step() { ++steps_; }
  // The record's throughput, step time and MFU for the steps counted from the restart to `end`.
  void measure(Clock::time_point end, StepRecord& record) const;

 private:
  int64_t terms_per_step_;
  double flops_per_term_;
  double peak_flops_;
  int devices_;
  Clock::time_point start_;
  int64_t steps_ = 0;
};

}  // namespace trainctl

// Which steps save a checkpoint: every checkpoint.every_steps steps; every
// checkpoint.every_minutes by rank 0's clock, which the ranks agree on at the step (a clock on
// each rank would disagree); a new best validation loss with keep_best; and the step that ends
// the run or the job (the last one, a stop signal's, early stopping's).
#pragma once

#include <chrono>
#include <cstdint>

#include "train_spec.h"

namespace trainctl {

class SavePolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // `keeps_time`: this rank's clock decides every_minutes (rank 0's).
  SavePolicy(const CheckpointSpec& spec, bool keeps_time) : spec_(spec), keeps_time_(keeps_time) {}

  // Restarts every_minutes's interval: when training starts and after each save.
  void restart_interval(Clock::time_point now) { last_save_ = now; }
  // This rank's word for the step's agreement: whether every_minutes has passed since the last save.
  bool interval_passed() const;
  // Whether `step` saves, given whether any rank said interval_passed(), whether the step's
  // evaluation found a new best validation loss, and whether the step ends the run or the job.
  bool saves(int64_t step, bool interval_passed_on_any_rank, bool new_best, bool ending) const;

 private:
  const CheckpointSpec& spec_;
  bool keeps_time_;
  Clock::time_point last_save_;
};

}  // namespace trainctl

// The rate of the logged steps and their MFU: see step_rate.h.
#include "step_rate.h"

namespace trainctl {

StepRate::StepRate(int64_t terms_per_step, double flops_per_term, double peak_flops, int devices)
    : terms_per_step_(terms_per_step), flops_per_term_(flops_per_term), peak_flops_(peak_flops), devices_(devices) {}

void StepRate::restart(Clock::time_point now) {
  start_ = now;
  steps_ = 0;
}

void StepRate::measure(Clock::time_point end, StepRecord& record) const {
  const double seconds = std::chrono::duration<double>(end - start_).count();
  record.terms_per_second = static_cast<double>(steps_ * terms_per_step_) / seconds;
  record.step_seconds = seconds / static_cast<double>(steps_);
  if (peak_flops_ > 0.0) record.mfu = record.terms_per_second * flops_per_term_ / (peak_flops_ * devices_);
}

}  // namespace trainctl

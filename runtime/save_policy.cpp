// Which steps save: see save_policy.h.
#include "save_policy.h"

namespace trainctl {

bool SavePolicy::interval_passed() const {
  if (!keeps_time_ || spec_.every_minutes <= 0.0) return false;
  return Clock::now() - last_save_ >= std::chrono::duration<double>(spec_.every_minutes * 60.0);
}

bool SavePolicy::saves(int64_t step, bool interval_passed_on_any_rank, bool new_best, bool ending) const {
  const bool scheduled = spec_.every_steps > 0 && step % spec_.every_steps == 0;
  return scheduled || interval_passed_on_any_rank || ending || (new_best && spec_.keep_best);
}

}  // namespace trainctl

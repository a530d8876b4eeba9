// A run's step budget: how far one start of a run trains when a sweep's [sweep.schedule] stops its
// trials at rungs (docs/sweeps.md). The batch script of such a sweep sets TRAINCTL_BUDGET_STEPS
// before each rung; trainctl-runtime trains to that step (never past train.steps), saves, logs
// the event "budget" and exits 0, and a [program] reads it, or its {budget.steps} placeholder, and
// does the same (docs/programs.md). Unset, a run trains to its end.
#pragma once

#include <cstdint>
#include <optional>

namespace trainctl {

inline constexpr const char* kBudgetStepsVariable = "TRAINCTL_BUDGET_STEPS";

// TRAINCTL_BUDGET_STEPS; nullopt when it is unset or empty. Throws BadInput for a value that is
// not a count of at least 1.
std::optional<int64_t> budget_steps_from_environment();

}  // namespace trainctl

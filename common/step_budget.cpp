// A run's step budget: see step_budget.h.
#include "step_budget.h"

#include <cstdlib>

#include <fmt/format.h>

#include "bad_input.h"
#include "count_text.h"

namespace trainctl {

std::optional<int64_t> budget_steps_from_environment() {
  const char* text = std::getenv(kBudgetStepsVariable);
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::optional<int64_t> steps = parse_count(text);
  if (!steps || *steps < 1) throw BadInput(fmt::format("{}=\"{}\" is not a count of steps", kBudgetStepsVariable, text));
  return steps;
}

}  // namespace trainctl

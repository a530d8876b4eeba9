// Job arrays: see job_array.h.
#include "job_array.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace trainctl {

std::vector<std::vector<int64_t>> split_into_arrays(const std::vector<int64_t>& tasks, int64_t max_array_size) {
  if (max_array_size < 1) throw std::invalid_argument(fmt::format("MaxArraySize {} leaves no room", max_array_size));
  std::vector<std::vector<int64_t>> arrays;
  const size_t slice = static_cast<size_t>(max_array_size);
  for (size_t begin = 0; begin < tasks.size(); begin += slice)
    arrays.emplace_back(tasks.begin() + static_cast<std::ptrdiff_t>(begin),
                        tasks.begin() + static_cast<std::ptrdiff_t>(std::min(tasks.size(), begin + slice)));
  return arrays;
}

std::string array_option(size_t count, std::optional<int64_t> max_parallel) {
  if (count == 0) throw std::invalid_argument("an array needs at least one task");
  std::string option = fmt::format("0-{}", count - 1);
  if (max_parallel) option += fmt::format("%{}", *max_parallel);
  return option;
}

}  // namespace trainctl

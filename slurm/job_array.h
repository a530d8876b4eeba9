// Job arrays: how a sweep's tasks become SLURM arrays. An array index must stay below the
// cluster's MaxArraySize, so N tasks become ceil(N / MaxArraySize) arrays, each indexed from 0;
// the batch script maps its index to a task (render.h), which also lets a resubmission run
// any subset of tasks as one array.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainctl {

// Consecutive slices of `tasks`, none longer than `max_array_size` (>= 1).
std::vector<std::vector<int64_t>> split_into_arrays(const std::vector<int64_t>& tasks, int64_t max_array_size);

// sbatch's --array value for `count` (>= 1) indices: "0-5", or "0-5%2" with a throttle.
std::string array_option(size_t count, std::optional<int64_t> max_parallel);

}  // namespace trainctl

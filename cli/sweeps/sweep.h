// Sweeps: the [sweep] table of a config, checked, and expanded into tasks.
//
//   [sweep]
//   "train.lr" = [1e-3, 3e-3, 1e-2]                        a grid axis: every value
//   model.hidden = [[64], [128, 128]]                      the same, written as a dotted key
//   "train.weight_decay" = { log_uniform = [1e-4, 1e-1] }  random: drawn once per sample
//   "train.micro_batch" = { choice = [16, 32, 64] }        and { uniform = [low, high] }
//   "params.lr" = [1e-4, 3e-4]                             a [program]'s params, the same way
//   samples = 4        random draws; required when there are random keys
//   seed = 0           the draws are a function of the seed alone
//   max_parallel = 2   tasks running at once, over all of the sweep's arrays
//   [sweep.schedule]   optional: stop the losers early, rung by rung (sweep_schedule.h)
//
// The tasks are the grid's Cartesian product (the first key written varies slowest) crossed
// with the draws: grid point g with draw d is task g * samples + d, so every grid point is
// paired with the same draws. uniform and log_uniform draw integers when both bounds are.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "config_reader.h"
#include "sweeps/sweep_schedule.h"

namespace trainctl {

struct SweepParameter {
  enum class Kind { kGrid, kUniform, kLogUniform, kChoice };
  std::string path;  // "train.lr"
  Kind kind = Kind::kGrid;
  toml::array values;  // the grid's values, the choices, or [low, high]
  SourcePosition position;
};

struct SweepSpec {
  std::vector<SweepParameter> parameters;  // in file order
  int64_t samples = 1;                     // random draws; 1 when no key is random
  uint64_t seed = 0;
  std::optional<int64_t> max_parallel;
  // Read here; its rungs are set once the config's trials are known (fit_schedule).
  std::optional<SweepSchedule> schedule;
  SourcePosition position;  // of the [sweep] table

  std::vector<std::string> paths() const;
};

// One task of a sweep: values[i] is the value of parameter i.
struct SweepTask {
  int64_t index = 0;
  toml::array values;
};

// Checks a whole config table the way submit reads it; throws ConfigError.
using ConfigCheck = std::function<void(const toml::table& root)>;

constexpr int64_t kMaxSweepTasks = 100000;

// Reads [sweep] of `root`; nullopt when there is none. Each value is checked by putting it into
// a copy of `root` and running `check`, so the config schema stays the one authority on paths
// and types; an error names the swept key and points at the offending value.
std::optional<SweepSpec> parse_sweep(const toml::table& root, const std::string& file, const ConfigCheck& check);

std::vector<SweepTask> expand_sweep(const SweepSpec& sweep);
// The number of tasks expand_sweep makes.
int64_t sweep_task_count(const SweepSpec& sweep);

// `root` with the task's values put in and [sweep] removed: the config the task trains from.
toml::table task_config(const toml::table& root, const std::vector<std::string>& paths, const toml::array& values);

// Every task's config, each checked: values that pass one by one may still clash (a swept
// grad_accum with a swept micro_batch), which is reported at [sweep], naming the task.
// for_each_task_config hands each checked config to `use` in turn and keeps none, so that a
// sweep at kMaxSweepTasks costs one config's memory.
void for_each_task_config(const toml::table& root, const SweepSpec& sweep, const std::vector<SweepTask>& tasks,
                          const ConfigCheck& check, const std::function<void(const SweepTask&, toml::table&)>& use);

// A value as a person reads it, on one line: 0.001, 64, [64, 64], 'relu' (strings as TOML writes them).
std::string describe_value(const toml::node& value);
// "train.lr=0.001 model.hidden=[64]"
std::string describe_task(const std::vector<std::string>& paths, const toml::array& values);

}  // namespace trainctl

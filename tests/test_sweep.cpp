// Tests for sweeps: reading [sweep] as load_config does (cli/sweeps/sweep.cpp, through cli/config_file.cpp),
// grid expansion in row-major file order, seeded random draws and their bounds, grid x random
// pairing, the exact "FILE:LINE:COL: key: message" text of bad sweep input, task configs and the
// check of each task's whole config, job-array splitting (slurm/job_array.cpp), the manifest's
// text round trip and its corruption errors (cli/sweeps/sweep_dir.cpp), the status helpers that need no
// SLURM (cli/sweeps/sweep_status.cpp, cli/runs/run_status.cpp: settle_state, reading metrics.jsonl), and the
// JSON they write (common/json.h, `sweep status --json`).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "config_file.h"
#include "config_files.h"
#include "config_reader.h"
#include "error_message.h"
#include "job_array.h"
#include "json.h"
#include "runs/run_status.h"
#include "sweeps/sweep.h"
#include "sweeps/sweep_dir.h"
#include "sweeps/sweep_status.h"

using trainctl::ConfigError;
using trainctl::SweepManifest;
using trainctl::SweepTask;
using trainctl::TaskStatus;

using namespace config_files;

namespace {

namespace fs = std::filesystem;

// kMinimalConfig with `train_keys` (whole lines) added to [train], then a [sweep] table of
// `sweep_lines`. Without train_keys, [sweep] is line 15 and its first key line 16.
std::string with_sweep(std::string_view sweep_lines, std::string_view train_keys = "") {
  std::string text(kMinimalConfig);
  text.append(train_keys).append("\n[sweep]\n").append(sweep_lines);
  return text;
}

std::string sweep_error(std::string_view sweep_lines) { return load_error(with_sweep(sweep_lines)); }

std::vector<SweepTask> expand(std::string_view sweep_lines) {
  const trainctl::Config config = load_text(with_sweep(sweep_lines));
  REQUIRE(config.sweep);
  return trainctl::expand_sweep(*config.sweep);
}

// Each task's values as one line, "[0.001, [32]]".
std::vector<std::string> described(const std::vector<SweepTask>& tasks) {
  std::vector<std::string> lines;
  for (const SweepTask& task : tasks) lines.push_back(trainctl::describe_value(task.values));
  return lines;
}

std::vector<int64_t> indices(const std::vector<SweepTask>& tasks) {
  std::vector<int64_t> result;
  for (const SweepTask& task : tasks) result.push_back(task.index);
  return result;
}

// The value of parameter `parameter` in every task.
std::vector<const toml::node*> column(const std::vector<SweepTask>& tasks, size_t parameter) {
  std::vector<const toml::node*> values;
  for (const SweepTask& task : tasks) values.push_back(task.values.get(parameter));
  return values;
}

std::vector<std::string> described(const std::vector<const toml::node*>& values) {
  std::vector<std::string> lines;
  for (const toml::node* value : values) lines.push_back(trainctl::describe_value(*value));
  return lines;
}

// One of each kind of random key, drawn 20 times.
std::string random_sweep(int seed) {
  return R"("train.lr" = { log_uniform = [1e-4, 1e-1] }
"train.weight_decay" = { uniform = [0, 0.1] }
"train.micro_batch" = { uniform = [4, 64] }
"train.warmup_steps" = { log_uniform = [1, 50] }
"model.activation" = { choice = ["relu", "gelu"] }
"train.grad_accum" = { choice = [1, 2, 4] }
samples = 20
seed = )" + std::to_string(seed) + "\n";
}

}  // namespace

TEST_CASE("a grid sweep is the Cartesian product, the first key written varying slowest") {
  // The dotted key sorts before "train.lr" by name; file order is what counts.
  const trainctl::Config config = load_text(with_sweep(R"("train.lr" = [1e-3, 1e-2]
model.hidden = [[32], [64], [128]]
)"));
  REQUIRE(config.sweep);
  CHECK(config.sweep->paths() == std::vector<std::string>{"train.lr", "model.hidden"});
  CHECK(config.sweep->samples == 1);
  CHECK_FALSE(config.sweep->max_parallel.has_value());
  const std::vector<SweepTask> tasks = trainctl::expand_sweep(*config.sweep);
  CHECK(indices(tasks) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(described(tasks) == std::vector<std::string>{"[0.001, [32]]", "[0.001, [64]]", "[0.001, [128]]",
                                                     "[0.01, [32]]", "[0.01, [64]]", "[0.01, [128]]"});
  for (const SweepTask& task : tasks) {
    CHECK(task.values[0].is_floating_point());
    CHECK(task.values[1].is_array());
  }
}

TEST_CASE("random draws are a function of the seed alone") {
  const std::vector<SweepTask> first = expand(random_sweep(7));
  REQUIRE(first.size() == 20);
  CHECK(first.back().index == 19);
  CHECK(described(first) == described(expand(random_sweep(7))));
  CHECK(described(first) != described(expand(random_sweep(8))));
  // Each draw is new: the 20 learning rates are all different.
  const std::vector<std::string> rates = described(column(first, 0));
  CHECK(std::set<std::string>(rates.begin(), rates.end()).size() == 20);
}

TEST_CASE("random draws stay within their bounds, and integer bounds draw integers") {
  const std::vector<SweepTask> tasks = expand(random_sweep(7));
  auto check_floats_in = [&](size_t parameter, double low, double high) {
    for (const toml::node* value : column(tasks, parameter)) {
      REQUIRE(value->is_floating_point());
      CHECK(*value->value<double>() >= low);
      CHECK(*value->value<double>() <= high);
    }
  };
  auto check_integers_in = [&](size_t parameter, int64_t low, int64_t high) {
    for (const toml::node* value : column(tasks, parameter)) {
      REQUIRE(value->is_integer());
      CHECK(*value->value<int64_t>() >= low);
      CHECK(*value->value<int64_t>() <= high);
    }
  };
  check_floats_in(0, 1e-4, 1e-1);
  check_floats_in(1, 0.0, 0.1);  // one float bound is enough for float draws
  check_integers_in(2, 4, 64);
  check_integers_in(3, 1, 50);

  // log_uniform spreads draws over the decades: a plain uniform draw over [1e-4, 1e-1] lands
  // below 1e-2 one time in ten, a log-uniform one two times in three.
  int below_a_hundredth = 0;
  for (const toml::node* value : column(tasks, 0)) below_a_hundredth += *value->value<double>() < 1e-2 ? 1 : 0;
  CHECK(below_a_hundredth >= 7);

  // choice picks only listed values, keeping their type, and not always the same one.
  const std::vector<std::string> activations = described(column(tasks, 4));
  CHECK(std::set<std::string>(activations.begin(), activations.end()) == std::set<std::string>{"'relu'", "'gelu'"});
  for (const toml::node* value : column(tasks, 5)) CHECK(value->is_integer());
  const std::vector<std::string> accumulations = described(column(tasks, 5));
  CHECK(std::set<std::string>(accumulations.begin(), accumulations.end()) == std::set<std::string>{"1", "2", "4"});
}

TEST_CASE("grid x random pairs every grid point with the same draws") {
  constexpr std::string_view kDraws = R"("train.weight_decay" = { uniform = [0.0, 0.1] }
samples = 4
seed = 3
)";
  const std::vector<SweepTask> tasks = expand(std::string(R"("train.lr" = [1e-3, 1e-2, 1e-1]
)") + std::string(kDraws));
  REQUIRE(tasks.size() == 3 * 4);
  CHECK(indices(tasks) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});

  // The draws do not depend on the grid: the same seed without the grid axis draws them too.
  const std::vector<std::string> draws = described(column(expand(kDraws), 0));
  REQUIRE(draws.size() == 4);
  CHECK(std::set<std::string>(draws.begin(), draws.end()).size() == 4);
  const std::vector<std::string> grid{"0.001", "0.01", "0.1"};
  for (size_t point = 0; point < grid.size(); ++point) {
    for (size_t draw = 0; draw < draws.size(); ++draw) {
      const SweepTask& task = tasks[point * draws.size() + draw];
      CAPTURE(task.index);
      CHECK(trainctl::describe_value(task.values[0]) == grid[point]);
      CHECK(trainctl::describe_value(task.values[1]) == draws[draw]);
    }
  }
}

TEST_CASE("a swept key must be a config path into a table a task may change") {
  CHECK(sweep_error(R"("train.lrr" = [0.1])") == R"(FILE:16:16: sweep.train.lrr: unknown key (did you mean "lr"?))");
  CHECK(sweep_error(R"("trian.lr" = [0.1])") ==
        R"(FILE:16:14: sweep.trian.lr: unknown config table "trian" (did you mean "train"?))");
  CHECK(sweep_error(R"("sweep.seed" = [1])") == R"(FILE:16:16: sweep.sweep.seed: unknown config table "sweep")");
  CHECK(sweep_error(R"("job.time" = ["00:10:00"])") ==
        "FILE:16:14: sweep.job.time: [job] is shared by every task of the array, so its keys cannot be swept");
  CHECK(sweep_error("lr = [0.1]") ==
        R"(FILE:16:6: sweep.lr: unknown sweep setting; a swept key is a config path such as "train.lr")");
  CHECK(sweep_error(R"("train.lr.x" = [0.1])") ==
        R"(FILE:16:16: sweep.train.lr.x: expected a config path of the form table.key, such as "train.lr")");
  CHECK(sweep_error("train.lr = [0.1]\n\"train.lr\" = [0.2]") ==
        R"(FILE:17:14: sweep.train.lr: given twice (once as a quoted "table.key", once as a dotted key))");
}

TEST_CASE("each swept value is judged by the config schema, at the value") {
  CHECK(sweep_error(R"("train.lr" = ["fast"])") == "FILE:16:15: sweep.train.lr: expected a number, got a string");
  CHECK(sweep_error(R"("train.lr" = [1e-3, -1.0])") == "FILE:16:21: sweep.train.lr: must be greater than 0");
  CHECK(sweep_error(R"("model.hidden" = [[32], [64, 0]])") ==
        "FILE:16:25: sweep.model.hidden: every element must be at least 1 (got 0)");
  // A random key's bounds are values too.
  CHECK(sweep_error(R"("train.lr" = { uniform = [-1.0, 0.1] })") ==
        "FILE:16:27: sweep.train.lr: must be greater than 0");
  // Checks across keys: against the config's other values, naming the key that objects.
  CHECK(sweep_error(R"("train.warmup_steps" = [10, 500])") ==
        "FILE:16:29: sweep.train.warmup_steps: must not exceed train.steps");
  CHECK(load_error(with_sweep(R"("train.steps" = [100, 10])", "warmup_steps = 50\n")) ==
        "FILE:17:23: sweep.train.steps: train.warmup_steps: must not exceed train.steps");
}

TEST_CASE("grids and distributions must be well formed") {
  constexpr std::string_view kValueForms =
      "expected a list of values (a grid) or one of { uniform = [low, high] }, { log_uniform = [low, high] }, "
      "{ choice = [value, ...] }";
  CHECK(sweep_error(R"("train.lr" = [])") ==
        "FILE:16:14: sweep.train.lr: an empty list sweeps nothing; give at least one value");
  CHECK(sweep_error(R"("train.lr" = { choice = [] })") ==
        "FILE:16:25: sweep.train.lr: an empty list sweeps nothing; give at least one value");
  CHECK(sweep_error(R"("train.lr" = 0.1)") == "FILE:16:14: sweep.train.lr: " + std::string(kValueForms));
  CHECK(sweep_error(R"("train.lr" = { uniform = [0.1, 0.2], choice = [1] })") ==
        "FILE:16:14: sweep.train.lr: " + std::string(kValueForms));
  CHECK(sweep_error(R"("train.lr" = { uniform = [0.1, 0.01] })") ==
        "FILE:16:26: sweep.train.lr: uniform range [0.1, 0.01] is empty; low must be below high");
  CHECK(sweep_error(R"("train.lr" = { uniform = [0.1] })") ==
        "FILE:16:26: sweep.train.lr: uniform takes [low, high], two numbers");
  CHECK(sweep_error(R"("train.lr" = { log_uniform = [0.1, "high"] })") ==
        "FILE:16:30: sweep.train.lr: log_uniform takes [low, high], two numbers");
  CHECK(sweep_error(R"("train.lr" = { log_uniform = [0.0, 0.1] })") ==
        "FILE:16:30: sweep.train.lr: log_uniform needs 0 < low (got 0)");
  CHECK(sweep_error(R"("train.lr" = { uniformm = [0.0, 0.1] })") ==
        R"(FILE:16:14: sweep.train.lr: unknown distribution "uniformm" (did you mean "uniform"?))");
  CHECK(sweep_error(R"("train.lr" = { choice = 0.1 })") ==
        "FILE:16:25: sweep.train.lr: choice takes a list of values, such as { choice = [16, 32] }");
}

TEST_CASE("a sweep can neither hold nor draw nan or inf") {
  CHECK(sweep_error(R"("train.lr" = [1e-3, nan])") == "FILE:16:21: sweep.train.lr: must be a finite number (got nan)");
  CHECK(sweep_error(R"("train.betas" = [[0.9, 0.99], [0.9, inf]])") ==
        "FILE:16:31: sweep.train.betas: element 1 must be a finite number (got inf)");
  CHECK(sweep_error(R"("train.lr" = { choice = [1e-3, -inf] })") ==
        "FILE:16:32: sweep.train.lr: must be a finite number (got -inf)");
  CHECK(sweep_error(R"("train.weight_decay" = { uniform = [0.0, inf] })") ==
        "FILE:16:36: sweep.train.weight_decay: uniform takes [low, high], two finite numbers (got [0, inf])");
  CHECK(sweep_error(R"("train.lr" = { log_uniform = [nan, 0.1] })") ==
        "FILE:16:30: sweep.train.lr: log_uniform takes [low, high], two finite numbers (got [nan, 0.1])");
  // high - low would be inf, and so would every draw.
  CHECK(sweep_error(R"("train.lr" = { uniform = [-1.7e308, 1.7e308] })") ==
        "FILE:16:26: sweep.train.lr: uniform range [-1.7e+308, 1.7e+308] is too wide: high - low must be a finite number");
}

TEST_CASE("the sweep's counts are bounded: 2^63-1 is refused") {
  CHECK(sweep_error("\"train.lr\" = { uniform = [0.001, 0.1] }\nsamples = 9223372036854775807") ==
        "FILE:17:11: sweep.samples: must be at most 100000 (got 9223372036854775807)");
  CHECK(sweep_error("\"train.lr\" = [0.1]\nmax_parallel = 9223372036854775807") ==
        "FILE:17:16: sweep.max_parallel: must be at most 100000 (got 9223372036854775807)");
  CHECK(sweep_error(R"("train.steps" = [9223372036854775807])") ==
        "FILE:16:18: sweep.train.steps: must be at most 1000000000 (got 9223372036854775807)");
  // The seed may be any non-negative int64, and so may an integer range over it.
  const std::vector<SweepTask> tasks = expand(
      "\"train.seed\" = { uniform = [0, 9223372036854775807] }\nsamples = 3\nseed = 9223372036854775807\n");
  for (const toml::node* seed : column(tasks, 0)) CHECK(seed->value<int64_t>() >= 0);
  const std::vector<SweepTask> logs = expand(
      "\"train.seed\" = { log_uniform = [1, 9223372036854775807] }\nsamples = 50\n");
  for (const toml::node* seed : column(logs, 0)) CHECK(seed->value<int64_t>() >= 1);
}

TEST_CASE("a float range is checked at the values it can draw: low, and just below high") {
  // momentum must lie in [0, 1); uniform draws lie in [low, high), so [0, 1] is fine.
  CHECK(sweep_error("\"train.momentum\" = { uniform = [0.0, 1.0] }\nsamples = 1\n") == "(no error)");
  CHECK(sweep_error(R"("train.momentum" = { uniform = [0.0, 1.5] })") ==
        "FILE:16:38: sweep.train.momentum: must be in [0, 1)");
  // Integer draws include high.
  CHECK(sweep_error(R"("train.micro_batch" = { uniform = [1, 0] })") ==
        "FILE:16:35: sweep.train.micro_batch: uniform range [1, 0] is empty; low must be below high");
  CHECK(sweep_error(R"("train.micro_batch" = { uniform = [0, 8] })") ==
        "FILE:16:36: sweep.train.micro_batch: must be at least 1 (got 0)");
}

TEST_CASE("the sweep's settings are checked") {
  CHECK(sweep_error(R"("train.lr" = { uniform = [0.001, 0.1] })") ==
        "FILE:15:1: sweep.samples: required: how many draws of the random keys (train.lr)");
  CHECK(sweep_error("\"train.lr\" = [0.1]\nsamples = 3") ==
        "FILE:17:11: sweep.samples: only random keys ({ uniform }, { log_uniform }, { choice }) are sampled, and "
        "this sweep has none");
  CHECK(sweep_error("seed = 3") ==
        R"(FILE:15:1: sweep: the table sweeps nothing; add a key such as "train.lr" = [1e-3, 1e-2])");
  CHECK(sweep_error("\"train.lr\" = [0.1]\nsample = 3") ==
        R"(FILE:17:10: sweep.sample: unknown sweep setting (did you mean "samples"?); a swept key is a config path )"
        R"(such as "train.lr")");
  CHECK(sweep_error("\"train.lr\" = [0.1]\nmax_parallel = 0") ==
        "FILE:17:16: sweep.max_parallel: must be at least 1 (got 0)");
  CHECK(sweep_error("\"train.lr\" = { uniform = [0.001, 0.1] }\nsamples = 0") ==
        "FILE:17:11: sweep.samples: must be at least 1 (got 0)");
  CHECK(sweep_error("\"train.lr\" = [0.1]\nseed = -1") == "FILE:17:8: sweep.seed: must be at least 0 (got -1)");
  // 10 x 10 x 10 x 10 x 11 grid points.
  CHECK(sweep_error(R"("train.micro_batch" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
"model.inputs" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
"model.classes" = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
"train.steps" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
"train.log_every" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
)") == "FILE:15:1: sweep: more than 100000 tasks; split the sweep into several configs");
}

TEST_CASE("a sweep's settings are read") {
  const trainctl::Config config =
      load_text(with_sweep("\"train.lr\" = { uniform = [0.001, 0.1] }\nsamples = 5\nseed = 11\nmax_parallel = 2\n"));
  REQUIRE(config.sweep);
  CHECK(config.sweep->samples == 5);
  CHECK(config.sweep->seed == 11);
  CHECK(config.sweep->max_parallel == std::optional<int64_t>(2));
  REQUIRE(config.sweep->parameters.size() == 1);
  CHECK(config.sweep->parameters[0].kind == trainctl::SweepParameter::Kind::kUniform);
  CHECK(config.sweep->parameters[0].position.line == 16);
  CHECK(config.sweep->parameters[0].position.column == 14);
  CHECK_FALSE(load_text(kMinimalConfig).sweep.has_value());
}

TEST_CASE("task_config puts the task's values in and drops [sweep]") {
  const trainctl::Config config = load_text(with_sweep("\"train.lr\" = [0.01, 0.1]\n"));
  const toml::table task = trainctl::task_config(config.table, {"train.lr", "model.hidden", "checkpoint.keep_last"},
                                                 toml::array{0.01, toml::array{64, 64}, 5});
  CHECK_FALSE(task.contains("sweep"));
  CHECK(task["train"]["lr"].value_exact<double>() == std::optional<double>(0.01));
  CHECK(*task["model"]["hidden"].as_array() == toml::array{64, 64});
  // A table the base config lacks is created.
  CHECK(task["checkpoint"]["keep_last"].value_exact<int64_t>() == std::optional<int64_t>(5));
  // The rest is the base config's, which stays as it was.
  CHECK(task["train"]["steps"].value_exact<int64_t>() == std::optional<int64_t>(100));
  CHECK(task["job"]["name"].value_exact<std::string>() == std::optional<std::string>("unit-test"));
  CHECK(config.table.contains("sweep"));
  CHECK_FALSE(config.table["train"]["lr"]);
  trainctl::check_config_table(task, config.path);
}

TEST_CASE("for_each_task_config checks each task's whole config, naming a task whose values clash") {
  // Each value is valid against the base config (steps 100, no warmup), but task 1 pairs
  // 10 steps with 50 warmup steps.
  const trainctl::Config config =
      load_text(with_sweep("\"train.steps\" = [10, 100]\n\"train.warmup_steps\" = [0, 50]\n"));
  REQUIRE(config.sweep);
  const std::vector<SweepTask> tasks = trainctl::expand_sweep(*config.sweep);
  const trainctl::ConfigCheck check = [&](const toml::table& table) {
    trainctl::check_config_table(table, config.path);
  };
  try {
    trainctl::for_each_task_config(config.table, *config.sweep, tasks, check, [](const SweepTask&, toml::table&) {});
    FAIL("for_each_task_config accepted a task with more warmup steps than steps");
  } catch (const ConfigError& error) {
    CHECK(located(error, config.path) ==
          "FILE:15:1: sweep: task 1 (train.steps=10 train.warmup_steps=50) is not a valid config: "
          "train.warmup_steps: must not exceed train.steps");
  }

  const std::vector<SweepTask> valid{tasks[0], tasks[3]};
  std::vector<toml::table> configs;
  trainctl::for_each_task_config(config.table, *config.sweep, valid, check,
                                 [&](const SweepTask&, toml::table& table) { configs.push_back(std::move(table)); });
  REQUIRE(configs.size() == 2);
  CHECK(configs[1]["train"]["steps"].value_exact<int64_t>() == std::optional<int64_t>(100));
  CHECK(configs[1]["train"]["warmup_steps"].value_exact<int64_t>() == std::optional<int64_t>(50));
  CHECK_FALSE(configs[1].contains("sweep"));
}

TEST_CASE("for_each_task_config hands over each checked task config in order, keeping none") {
  const trainctl::Config config = load_text(with_sweep("\"train.lr\" = [0.01, 0.1]\n\"train.steps\" = [50, 60]\n"));
  const std::vector<SweepTask> tasks = trainctl::expand_sweep(*config.sweep);
  const auto check = [&](const toml::table& table) { trainctl::check_config_table(table, config.path); };
  std::vector<std::string> seen;
  trainctl::for_each_task_config(config.table, *config.sweep, tasks, check,
                                 [&](const SweepTask& task, toml::table& table) {
                                   CHECK_FALSE(table.contains("sweep"));
                                   seen.push_back(fmt::format("{} {} {}", task.index, *table["train"]["lr"].value<double>(),
                                                              *table["train"]["steps"].value<int64_t>()));
                                 });
  CHECK(seen == std::vector<std::string>{"0 0.01 50", "1 0.01 60", "2 0.1 50", "3 0.1 60"});
}

TEST_CASE("describe_task writes path=value pairs on one line") {
  CHECK(trainctl::describe_task({"train.lr", "model.hidden", "model.activation"},
                                toml::array{0.001, toml::array{64, 64}, "gelu"}) ==
        "train.lr=0.001 model.hidden=[64, 64] model.activation='gelu'");
}

TEST_CASE("split_into_arrays slices the tasks in order, none longer than MaxArraySize") {
  using Arrays = std::vector<std::vector<int64_t>>;
  CHECK(trainctl::split_into_arrays({0, 1, 2, 3, 4, 5, 6}, 3) == Arrays{{0, 1, 2}, {3, 4, 5}, {6}});
  CHECK(trainctl::split_into_arrays({0, 1, 2, 3, 4, 5}, 3) == Arrays{{0, 1, 2}, {3, 4, 5}});
  CHECK(trainctl::split_into_arrays({0, 1, 2}, 1) == Arrays{{0}, {1}, {2}});
  CHECK(trainctl::split_into_arrays({0, 1, 2}, 1001) == Arrays{{0, 1, 2}});
  // A resubmission's tasks need not be consecutive.
  CHECK(trainctl::split_into_arrays({2, 3, 7, 11, 12}, 2) == Arrays{{2, 3}, {7, 11}, {12}});
  CHECK(trainctl::split_into_arrays({}, 3).empty());
}

TEST_CASE("array_option gives sbatch's --array range, with the throttle when there is one") {
  CHECK(trainctl::array_option(6, 2) == "0-5%2");
  CHECK(trainctl::array_option(6, std::nullopt) == "0-5");
  CHECK(trainctl::array_option(1, std::nullopt) == "0-0");
}

TEST_CASE("job-array helpers refuse a MaxArraySize below 1 and an empty array") {
  CHECK_THROWS_WITH_AS(trainctl::split_into_arrays({0, 1}, 0), "MaxArraySize 0 leaves no room", std::invalid_argument);
  CHECK_THROWS_WITH_AS(trainctl::split_into_arrays({0, 1}, -1), "MaxArraySize -1 leaves no room",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(trainctl::array_option(0, 2), "an array needs at least one task", std::invalid_argument);
}

namespace {

// A manifest with a value of every kind, and arrays with and without `after`.
SweepManifest sample_manifest(std::optional<int64_t> max_parallel) {
  SweepManifest manifest;
  manifest.name = "lr-sweep";
  manifest.config = "/home/alice/configs/sweep.toml";
  manifest.parameters = {"train.lr", "train.micro_batch", "model.activation", "model.hidden"};
  manifest.samples = 2;
  manifest.seed = 7;
  manifest.max_parallel = max_parallel;
  manifest.tasks = {SweepTask{0, toml::array{0.001, 16, "relu", toml::array{64, 64}}},
                    SweepTask{1, toml::array{0.035, 32, "it's \"quoted\"", toml::array{128}}}};
  manifest.arrays = {{"143", {0, 1}, "arrays/array-0.sbatch", "submit", "", "2026-11-22T03:40:01Z"},
                     {"150", {1}, "arrays/array-1.sbatch", "resubmit --failed", "143", "2026-11-22T04:12:30Z"},
                     {"151", {0}, "arrays/array-2.sbatch", "resubmit --failed", "", "2026-11-22T04:13:00Z"}};
  return manifest;
}

void check_same_manifest(const SweepManifest& parsed, const SweepManifest& expected) {
  CHECK(parsed.name == expected.name);
  CHECK(parsed.config == expected.config);
  CHECK(parsed.parameters == expected.parameters);
  CHECK(parsed.samples == expected.samples);
  CHECK(parsed.seed == expected.seed);
  CHECK(parsed.max_parallel == expected.max_parallel);
  REQUIRE(parsed.tasks.size() == expected.tasks.size());
  for (size_t i = 0; i < expected.tasks.size(); ++i) {
    CAPTURE(i);
    CHECK(parsed.tasks[i].index == expected.tasks[i].index);
    // toml's equality compares types too: 16 is not 16.0.
    CHECK(parsed.tasks[i].values == expected.tasks[i].values);
  }
  REQUIRE(parsed.arrays.size() == expected.arrays.size());
  for (size_t i = 0; i < expected.arrays.size(); ++i) {
    CAPTURE(i);
    CHECK(parsed.arrays[i].job_id == expected.arrays[i].job_id);
    CHECK(parsed.arrays[i].tasks == expected.arrays[i].tasks);
    CHECK(parsed.arrays[i].script == expected.arrays[i].script);
    CHECK(parsed.arrays[i].reason == expected.arrays[i].reason);
    CHECK(parsed.arrays[i].after == expected.arrays[i].after);
    CHECK(parsed.arrays[i].submitted == expected.arrays[i].submitted);
  }
}

// A manifest as a person might write it. Lines: 9 and 13 the tasks' indices, 10 and 14 their
// params, 18 the array's tasks.
constexpr std::string_view kManifestText = R"(format = 1
name = "lr-sweep"
config = "/home/alice/configs/sweep.toml"
parameters = ["train.lr", "model.hidden"]
samples = 1
seed = 0

[[tasks]]
index = 0
params = { "train.lr" = 0.001, "model.hidden" = [64] }

[[tasks]]
index = 1
params = { "train.lr" = 0.01, "model.hidden" = [64] }

[[arrays]]
job_id = "143"
tasks = [0, 1]
script = "arrays/array-0.sbatch"
reason = "submit"
submitted = "2026-11-22T03:40:01Z"
)";

// kManifestText with the one occurrence of `from` replaced by `to`.
std::string corrupted(std::string_view from, std::string_view to) {
  std::string text(kManifestText);
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "not in the manifest: " << from);
  REQUIRE_MESSAGE(text.find(from, at + 1) == std::string::npos, "twice in the manifest: " << from);
  return text.replace(at, from.size(), to);
}

std::string manifest_error(const std::string& text) {
  return error_message<ConfigError>([&] { (void)trainctl::parse_manifest(text, "manifest.toml"); });
}

}  // namespace

TEST_CASE("a manifest survives manifest_text and parse_manifest unchanged") {
  for (const std::optional<int64_t> max_parallel : {std::optional<int64_t>(3), std::optional<int64_t>()}) {
    CAPTURE(max_parallel.has_value());
    const SweepManifest manifest = sample_manifest(max_parallel);
    const std::string text = trainctl::manifest_text(manifest);
    if (max_parallel)
      CHECK(text.find("\nmax_parallel = 3\n") != std::string::npos);
    else
      CHECK(text.find("max_parallel") == std::string::npos);
    const SweepManifest parsed = trainctl::parse_manifest(text, "manifest.toml");
    check_same_manifest(parsed, manifest);
    CHECK(trainctl::manifest_text(parsed) == text);
  }
}

TEST_CASE("parse_manifest reads a manifest written by hand") {
  SweepManifest expected;
  expected.name = "lr-sweep";
  expected.config = "/home/alice/configs/sweep.toml";
  expected.parameters = {"train.lr", "model.hidden"};
  expected.tasks = {SweepTask{0, toml::array{0.001, toml::array{64}}},
                    SweepTask{1, toml::array{0.01, toml::array{64}}}};
  expected.arrays = {{"143", {0, 1}, "arrays/array-0.sbatch", "submit", "", "2026-11-22T03:40:01Z"}};
  check_same_manifest(trainctl::parse_manifest(kManifestText, "manifest.toml"), expected);
}

TEST_CASE("a corrupt manifest is a ConfigError at the offending key") {
  CHECK(manifest_error(corrupted(R"(params = { "train.lr" = 0.01, "model.hidden" = [64] })",
                                 R"(params = { "train.lr" = 0.01 })")) ==
        R"(manifest.toml:14:10: tasks[1].params: no value for "model.hidden")");
  CHECK(manifest_error(corrupted("index = 1", "index = 2")) ==
        "manifest.toml:13:9: tasks[1].index: expected 1: tasks are listed in order");
  CHECK(manifest_error(corrupted(R"(job_id = "143")", R"(job_id = "143 --wrap=rm")")) ==
        R"(manifest.toml:17:10: arrays[0].job_id: "143 --wrap=rm" is no SLURM job id)");
  CHECK(manifest_error(corrupted("tasks = [0, 1]", "tasks = [0, 2]")) ==
        "manifest.toml:18:9: arrays[0].tasks: task 2 is not in the sweep");
  CHECK(manifest_error(corrupted("format = 1", "format = 2")) ==
        "manifest.toml:1:10: manifest.format: this trainctl reads manifest format 1");
  CHECK(manifest_error(corrupted("seed = 0\n", "")) == "manifest.toml:1:1: manifest.seed: required key is missing");
  CHECK(manifest_error(corrupted("[[arrays]]", "[arrays]")) ==
        "manifest.toml:16:1: arrays: expected an array of tables");
}

namespace {

TaskStatus ranked_task(int64_t task, std::optional<double> best_val_loss, std::optional<double> loss = std::nullopt) {
  TaskStatus status;
  status.task = task;
  status.run.best_val_loss = best_val_loss;
  status.run.loss = loss;
  return status;
}

std::vector<int64_t> ranked_order(std::vector<TaskStatus> statuses, trainctl::RankMetric metric) {
  trainctl::rank_tasks(statuses, metric);
  std::vector<int64_t> order;
  for (const TaskStatus& status : statuses) order.push_back(status.task);
  return order;
}

TaskStatus in_state(const std::string& state) {
  TaskStatus status;
  status.run.state = state;
  return status;
}

// A run with `outcome` and `job_id` on record, settled against SLURM's view.
trainctl::RunStatus settled(const std::string& outcome, const std::string& job_id,
                            const std::optional<trainctl::SlurmView>& slurm) {
  trainctl::RunStatus status;
  status.outcome = outcome;
  status.job_id = job_id;
  trainctl::settle_state(status, slurm);
  return status;
}

}  // namespace

TEST_CASE("rank_tasks orders by the metric, tasks without it last, ties by task") {
  // Listed in reverse, so that ties come out by task only if they are broken by task.
  const std::vector<TaskStatus> statuses{ranked_task(5, 0.5, 0.1),          ranked_task(4, std::nullopt, 0.2),
                                         ranked_task(3, 0.5, std::nullopt), ranked_task(2, 0.3, 0.7),
                                         ranked_task(1, std::nullopt, 0.2), ranked_task(0, 0.5, 0.9)};
  using Order = std::vector<int64_t>;
  CHECK(ranked_order(statuses, trainctl::RankMetric::kBestValLoss) == Order{2, 0, 3, 5, 1, 4});
  CHECK(ranked_order(statuses, trainctl::RankMetric::kLoss) == Order{5, 1, 4, 2, 0, 3});
  CHECK(ranked_order(statuses, trainctl::RankMetric::kTask) == Order{0, 1, 2, 3, 4, 5});
}

TEST_CASE("default_rank_metric ranks by validation loss once any task has one") {
  CHECK(trainctl::default_rank_metric({ranked_task(0, std::nullopt, 0.4), ranked_task(1, 0.6, 0.5)}) ==
        trainctl::RankMetric::kBestValLoss);
  CHECK(trainctl::default_rank_metric({ranked_task(0, std::nullopt, 0.4), ranked_task(1, std::nullopt)}) ==
        trainctl::RankMetric::kLoss);
  CHECK(trainctl::default_rank_metric({}) == trainctl::RankMetric::kLoss);
}

TEST_CASE("needs_resubmission picks the tasks that are neither queued, running nor completed") {
  CHECK_FALSE(trainctl::needs_resubmission(in_state("COMPLETED")));
  CHECK_FALSE(trainctl::needs_resubmission(in_state("RUNNING")));
  CHECK_FALSE(trainctl::needs_resubmission(in_state("PENDING")));
  CHECK_FALSE(trainctl::needs_resubmission(in_state("REQUEUED")));
  CHECK(trainctl::needs_resubmission(in_state("FAILED")));
  CHECK(trainctl::needs_resubmission(in_state("CANCELLED")));
  CHECK(trainctl::needs_resubmission(in_state("TIMEOUT")));
  // slurmctld has no record and the run directory no outcome (resubmit refuses to decide
  // without SLURM's answer), or the task's array was never accepted: nothing will run it.
  CHECK(trainctl::needs_resubmission(in_state("UNKNOWN")));
  CHECK(trainctl::needs_resubmission(in_state("LOCAL")));
}

TEST_CASE("settle_state: SLURM's state while the job is active, then the outcome, then SLURM's end") {
  // An active job's state wins over an outcome left by an earlier run.
  const trainctl::RunStatus running = settled("failed: exit 3", "55_1", trainctl::SlurmView{"RUNNING", "None", 2});
  CHECK(running.state == "RUNNING");
  CHECK(running.reason == "");
  CHECK(running.restarts == 2);
  const trainctl::RunStatus pending = settled("", "", trainctl::SlurmView{"PENDING", "JobArrayTaskLimit", 0});
  CHECK(pending.state == "PENDING");
  CHECK(pending.reason == "JobArrayTaskLimit");

  // Once SLURM's state is final, the batch script's outcome says how training ended.
  CHECK(settled("completed", "55_1", trainctl::SlurmView{"CANCELLED", "None", 0}).state == "COMPLETED");
  CHECK(settled("stopped: max_requeues", "55_1", trainctl::SlurmView{"TIMEOUT", "None", 5}).state == "FAILED");
  CHECK(settled("completed", "55_1", std::nullopt).state == "COMPLETED");
  CHECK(settled("failed: exit 3", "55_1", std::nullopt).state == "FAILED");

  // Without an outcome, SLURM's final state; without either, nothing is known.
  CHECK(settled("", "55_1", trainctl::SlurmView{"CANCELLED", "None", 0}).state == "CANCELLED");
  CHECK(settled("", "55_1", std::nullopt).state == "UNKNOWN");
  CHECK(settled("", "", std::nullopt).state == "LOCAL");
}

namespace {

// A sweep directory of four tasks: array 100 ran tasks 0-3, array 200 is task 2 resubmitted.
// Task 0 completed and was purged from slurmctld, task 1 is running, task 2 failed in array 100
// and is pending again in 200, task 3 was cancelled while pending (no record of its own).
struct FourTaskSweep {
  TempDir dir;
  trainctl::SweepDir sweep{(dir.path() / "sweep").string()};
  SweepManifest manifest;

  FourTaskSweep() {
    manifest.name = "unit";
    manifest.config = "/configs/unit.toml";
    manifest.parameters = {"train.lr"};
    for (int64_t task = 0; task < 4; ++task) {
      SweepTask entry;
      entry.index = task;
      entry.values.push_back(0.1 * static_cast<double>(task + 1));
      manifest.tasks.push_back(std::move(entry));
      sweep.task(task).prepare({"[job]\n"}, /*resume=*/false);
    }
    manifest.arrays = {{"100", {0, 1, 2, 3}, "arrays/array-0.sbatch", "submit", "", "2026-11-22T00:00:00Z"},
                       {"200", {2}, "arrays/array-1.sbatch", "resubmit --failed", "", "2026-11-22T01:00:00Z"}};
    record(0, "100_0", "completed");
    record(1, "100_1", "");
    record(2, "100_2", "");  // reset by the resubmission
  }
  void record(int64_t task, const std::string& job_id, const std::string& outcome) const {
    std::ofstream(sweep.task(task).job_id_file()) << job_id << "\n";
    if (!outcome.empty()) std::ofstream(sweep.task(task).outcome()) << outcome << "\n";
  }
};

std::vector<std::string> states(const std::vector<TaskStatus>& statuses) {
  std::vector<std::string> result;
  for (const TaskStatus& status : statuses) result.push_back(status.run.state + "/" + status.run.reason);
  return result;
}

}  // namespace

TEST_CASE("read_sweep_status joins run directories with the newest array's view of each task") {
  FourTaskSweep fixture;
  CHECK(trainctl::array_job_ids(fixture.manifest) == std::vector<std::string>{"100", "200"});
  const std::vector<trainctl::ArrayTaskInfo> queued{{"100", 1, "RUNNING", "None", 1},
                                                    {"100", 2, "FAILED", "NonZeroExitCode", 0},
                                                    {"200", 0, "PENDING", "BeginTime", 0}};
  const std::vector<TaskStatus> statuses = trainctl::read_sweep_status(fixture.sweep, fixture.manifest, queued);
  CHECK(states(statuses) == std::vector<std::string>{"COMPLETED/", "RUNNING/", "PENDING/BeginTime",
                                                      "CANCELLED/cancelled before it started"});
  CHECK(statuses[1].run.restarts == 1);
  CHECK(statuses[0].run.job_id == "100_0");

  // Without SLURM's answer only the run directories speak.
  const std::vector<TaskStatus> offline = trainctl::read_sweep_status(fixture.sweep, fixture.manifest, std::nullopt);
  CHECK(states(offline) == std::vector<std::string>{"COMPLETED/SLURM is not reachable", "UNKNOWN/SLURM is not reachable",
                                                     "UNKNOWN/SLURM is not reachable", "LOCAL/SLURM is not reachable"});
  // Once slurmctld has forgotten both arrays, a task that never started is LOCAL: resubmitted.
  const std::vector<TaskStatus> forgotten = trainctl::read_sweep_status(fixture.sweep, fixture.manifest,
                                                                        std::vector<trainctl::ArrayTaskInfo>{});
  CHECK(states(forgotten) == std::vector<std::string>{"COMPLETED/", "UNKNOWN/", "UNKNOWN/", "LOCAL/"});
  CHECK_FALSE(trainctl::needs_resubmission(forgotten[0]));
  CHECK(trainctl::needs_resubmission(forgotten[3]));
}

TEST_CASE("JSON writes non-finite numbers as null") {
  const trainctl::Json record{{"loss", std::numeric_limits<double>::quiet_NaN()},
                              {"lr", std::numeric_limits<double>::infinity()},
                              {"grad_norm", -std::numeric_limits<double>::infinity()},
                              {"step", 3}};
  CHECK(trainctl::json_text(record) == R"({"loss":null,"lr":null,"grad_norm":null,"step":3})");
}

TEST_CASE("a run's record skips metrics lines that do not parse, such as one being appended") {
  TempDir dir;
  const trainctl::RunDir run((dir.path() / "run").string());
  run.prepare({"[job]\n"}, /*resume=*/false);
  std::ofstream(run.metrics()) << R"({"step":0,"event":"start","detail":"fresh"}
{"step":10,"loss":0.5,"lr":0.01,"grad_norm":1.0,"samples_per_s":100.0,"global_batch":8,"elapsed_s":1.0}
{"step":10,"val_loss":0.7,"val_accuracy":0.5}
{"step":20,"loss":0.25,"lr":0.01,"grad_norm":1.0,"samples_per_s":100.0,"global_batch":8,"elapsed_s":2.0}
{"step":20,"val_loss":0.9,"val_accuracy":0.6}
{"step":30,"loss":null}
not json at all
{"step":40,"loss":0.125,"lr":0.0)";
  const trainctl::RunStatus status = trainctl::read_run_record(run);
  CHECK(status.step == 20);
  CHECK(status.loss == 0.25);
  CHECK(status.val_loss == 0.9);
  CHECK(status.best_val_loss == 0.7);
}

TEST_CASE("sweep status JSON: list parameters are arrays, ranked tasks first, then the run status") {
  SweepManifest manifest = sample_manifest(std::nullopt);
  manifest.parameters.push_back("train.shuffle");
  manifest.tasks[0].values.push_back(true);
  manifest.tasks[1].values.push_back(false);
  TaskStatus ranked = ranked_task(1, 0.5, 0.25);
  ranked.run.run_dir = "/sweeps/lr/tasks/1";
  ranked.run.job_id = "143_1";
  ranked.run.state = "COMPLETED";
  ranked.run.step = 40;
  ranked.run.val_loss = 0.5;
  ranked.run.outcome = "completed";
  TaskStatus unranked = ranked_task(0, std::nullopt);
  unranked.run.state = "PENDING";
  unranked.run.reason = "Priority";
  CHECK(trainctl::sweep_status_json(manifest, {ranked, unranked}, trainctl::RankMetric::kBestValLoss) ==
        R"([{"task":1,"params":{"train.lr":0.035,"train.micro_batch":32,"model.activation":"it's \"quoted\"",)"
        R"("model.hidden":[128],"train.shuffle":false},"rank":1,"run_dir":"/sweeps/lr/tasks/1","job_id":"143_1",)"
        R"("state":"COMPLETED","reason":"","restarts":0,"step":40,"loss":0.25,"val_loss":0.5,"best_val_loss":0.5,)"
        R"("outcome":"completed"},)"
        "\n "
        R"({"task":0,"params":{"train.lr":0.001,"train.micro_batch":16,"model.activation":"relu",)"
        R"("model.hidden":[64,64],"train.shuffle":true},"run_dir":"","job_id":"","state":"PENDING",)"
        R"("reason":"Priority","restarts":0,"outcome":""}])"
        "\n");
  CHECK(trainctl::sweep_status_json(manifest, {}, trainctl::RankMetric::kLoss) == "[]\n");
}

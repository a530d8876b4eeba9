// Tests for sweeps that stop their losers early: [sweep.schedule] read and fitted as load_config
// does (cli/sweeps/sweep_schedule.cpp), with the exact "FILE:LINE:COL: key: message" of each
// schedule that cannot work; the rungs and the budget arithmetic; the decisions
// (cli/sweeps/rung_decisions.cpp): halving the same in every order of its results, ASHA equal to
// its rule replayed result by result, a non-finite value never promoted; the record of the rungs
// and its lock (cli/sweeps/rung_log.cpp); a trial's step at its rungs end to end against a fake
// SLURM (cli/sweeps/rung_step.cpp): recording, stopping, promoting from a rung into a new array,
// a failed submission left for `resubmit --failed`; a scheduled trial's state, ranking and JSON
// (cli/sweeps/sweep_status.cpp) and chart (cli/loss_plot.cpp); the manifest's schedule; metrics
// values by key (common/metrics_file.cpp).
#include <doctest/doctest.h>

#include <sys/file.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "bad_input.h"
#include "command_runner.h"
#include "config_file.h"
#include "config_files.h"
#include "errors.h"
#include "json.h"
#include "loss_plot.h"
#include "metrics_file.h"
#include "runs/run_status.h"
#include "slurm_client.h"
#include "sweeps/rung_decisions.h"
#include "sweeps/rung_log.h"
#include "sweeps/rung_step.h"
#include "sweeps/sweep_dir.h"
#include "sweeps/sweep_schedule.h"
#include "sweeps/sweep_status.h"

using trainctl::RungResult;
using trainctl::SweepSchedule;
using trainctl::TrialRungs;

using namespace config_files;

namespace {

namespace fs = std::filesystem;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// kMinimalConfig with data.val (line 10) and `train_keys` added to [train] (line 15 on), then
// [sweep] over 9 learning rates and 3 seeds (27 trials), `extra` sweep lines, and [sweep.schedule]
// of `schedule_lines`. With one train key line and no extra, [sweep.schedule] is line 19 and its
// keys follow from line 20.
std::string scheduled(std::string_view schedule_lines, std::string_view train_keys = "eval_every = 10\n",
                      std::string_view extra = "") {
  std::string text(kMinimalConfig);
  const std::string_view train_file = "train = \"train.h5\"\n";
  text.insert(text.find(train_file) + train_file.size(), "val = \"val.h5\"\n");
  text.append(train_keys)
      .append("[sweep]\n\"train.lr\" = [1e-4, 2e-4, 3e-4, 1e-3, 2e-3, 3e-3, 1e-2, 2e-2, 3e-2]\n\"train.seed\" = [1, 2, 3]\n")
      .append(extra)
      .append("[sweep.schedule]\n")
      .append(schedule_lines);
  return text;
}

SweepSchedule fitted(std::string_view schedule_lines, std::string_view train_keys = "eval_every = 10\n") {
  const trainctl::Config config = load_text(scheduled(schedule_lines, train_keys));
  REQUIRE(config.sweep);
  REQUIRE(config.sweep->schedule);
  return *config.sweep->schedule;
}

SweepSchedule schedule_of(SweepSchedule::Kind kind, std::vector<int64_t> rungs, int64_t eta = 3, bool maximize = false) {
  SweepSchedule schedule;
  schedule.kind = kind;
  schedule.rungs = std::move(rungs);
  schedule.reduction_factor = eta;
  schedule.maximize = maximize;
  return schedule;
}

// Each trial's results by rung, and whether it went on from each: "0.5+ 0.4" went on from rung 0.
std::vector<std::string> described(const std::vector<TrialRungs>& decided) {
  std::vector<std::string> lines;
  for (const TrialRungs& trial : decided) {
    std::string line;
    for (const trainctl::TrialRung& rung : trial.reached)
      line += fmt::format("{}{}{}", line.empty() ? "" : " ", rung.value, rung.promoted ? "+" : "");
    lines.push_back(line);
  }
  return lines;
}

// ASHA's rule as the issue states it, replayed result by result: after each, the best n / η of
// the n results at that rung (finite ones) go on. The reference for decide_rungs.
std::vector<std::set<int64_t>> asha_by_replay(const SweepSchedule& schedule, const std::vector<RungResult>& log) {
  std::vector<std::set<int64_t>> promoted(schedule.rungs.size());
  std::vector<std::vector<std::pair<double, int64_t>>> results(schedule.rungs.size());
  for (const RungResult& result : log) {
    auto& rung = results[static_cast<size_t>(result.rung)];
    const double badness = !std::isfinite(result.value) ? INFINITY : schedule.maximize ? -result.value : result.value;
    rung.push_back({badness, result.trial});
    std::vector<std::pair<double, int64_t>> sorted = rung;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size() / static_cast<size_t>(schedule.reduction_factor); ++i)
      if (std::isfinite(sorted[i].first)) promoted[static_cast<size_t>(result.rung)].insert(sorted[i].second);
  }
  return promoted;
}

// A log in which `trials` trials reach rung 0 in a random order with random values (a tenth of
// them not finite, some tied), and every promoted trial goes on at a random later point.
std::vector<RungResult> random_log(const SweepSchedule& schedule, int64_t trials, std::mt19937_64& rng) {
  std::vector<RungResult> log;
  std::vector<int64_t> order(static_cast<size_t>(trials));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> waiting(order.begin(), order.end());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto value = [&] {
    const double u = unit(rng);
    return u < 0.1 ? kNan : std::round(u * 20) / 20;  // coarse: ties happen
  };
  std::vector<size_t> next(static_cast<size_t>(trials), 0);
  while (!waiting.empty()) {
    const size_t pick = std::uniform_int_distribution<size_t>(0, waiting.size() - 1)(rng);
    const int64_t trial = waiting[pick];
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(pick));
    const size_t rung = next[static_cast<size_t>(trial)]++;
    log.push_back({trial, static_cast<int64_t>(rung), schedule.rungs[rung], value()});
    // Trials promoted by now go on (each once), at a random point among those still waiting.
    const std::vector<TrialRungs> decided = trainctl::decide_rungs(schedule, trials, log);
    for (int64_t t = 0; t < trials; ++t) {
      const auto& reached = decided[static_cast<size_t>(t)].reached;
      if (!reached.empty() && reached.back().promoted && reached.size() == next[static_cast<size_t>(t)] &&
          std::find(waiting.begin(), waiting.end(), t) == waiting.end() && reached.size() < schedule.rungs.size())
        waiting.push_back(t);
    }
  }
  return log;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("[sweep.schedule] is read with its defaults and fitted to train.steps") {
  const SweepSchedule schedule = fitted("kind = \"asha\"\nmin_steps = 10\n");
  CHECK(schedule.kind == SweepSchedule::Kind::kAsha);
  CHECK(schedule.metric == "val_loss");
  CHECK_FALSE(schedule.maximize);
  CHECK(schedule.reduction_factor == 3);
  CHECK(schedule.rungs == std::vector<int64_t>{10, 30, 90, 100});

  const SweepSchedule halving =
      fitted("kind = \"halving\"\nmetric = \"val_accuracy\"\nmode = \"max\"\nreduction_factor = 2\nmin_steps = 20\n");
  CHECK(halving.kind == SweepSchedule::Kind::kHalving);
  CHECK(halving.metric == "val_accuracy");
  CHECK(halving.maximize);
  CHECK(halving.rungs == std::vector<int64_t>{20, 40, 80, 100});
  // The training loss is logged every log_every steps.
  CHECK(fitted("kind = \"asha\"\nmetric = \"loss\"\nmin_steps = 20\n", "log_every = 20\n").rungs ==
        std::vector<int64_t>{20, 60, 100});
}

TEST_CASE("the rungs are min_steps x η^k below the full budget, then the full budget") {
  CHECK(trainctl::rung_steps(20, 3, 540) == std::vector<int64_t>{20, 60, 180, 540});
  CHECK(trainctl::rung_steps(20, 3, 500) == std::vector<int64_t>{20, 60, 180, 500});
  CHECK(trainctl::rung_steps(1, 2, 5) == std::vector<int64_t>{1, 2, 4, 5});
  // No overflow however large the budget.
  CHECK(trainctl::rung_steps(1, 1000, INT64_MAX).size() == 8);
}

TEST_CASE("a schedule that cannot work is refused at its key") {
  struct Case {
    std::string_view schedule, train_keys, extra, error;
  };
  constexpr std::string_view kEval = "eval_every = 10\n";
  // [sweep.schedule] is line 19 with one train key line; its first key is line 20.
  const Case cases[] = {
      {"min_steps = 10\n", kEval, "", "FILE:19:1: sweep.schedule.kind: required key is missing"},
      {"kind = \"hyperband\"\nmin_steps = 10\n", kEval, "",
       "FILE:20:8: sweep.schedule.kind: must be one of \"asha\", \"halving\" (got \"hyperband\")"},
      {"kind = \"asha\"\nreduction_factor = 1\nmin_steps = 10\n", kEval, "",
       "FILE:21:20: sweep.schedule.reduction_factor: must be at least 2 (got 1)"},
      {"kind = \"asha\"\nmin_steps = 100\n", kEval, "",
       "FILE:21:13: sweep.schedule.min_steps: the first rung (100) must come before the full budget "
       "(train.steps = 100)"},
      {"kind = \"asha\"\nmode = \"lowest\"\nmin_steps = 10\n", kEval, "",
       "FILE:21:8: sweep.schedule.mode: must be one of \"min\", \"max\" (got \"lowest\")"},
      {"kind = \"asha\"\nmin_steps = 10\nmetrik = \"loss\"\n", kEval, "",
       "FILE:22:10: sweep.schedule.metrik: unknown key (did you mean \"metric\"?)"},
      // A metric the model never logs.
      {"kind = \"asha\"\nmetric = \"accuracy\"\nmin_steps = 10\n", kEval, "",
       "FILE:21:10: sweep.schedule.metric: trainctl-runtime logs no \"accuracy\"; it logs loss, val_loss, "
       "val_accuracy and, for a language model, val_perplexity"},
      {"kind = \"asha\"\nmetric = \"val_perplexity\"\nmin_steps = 10\n", kEval, "",
       "FILE:21:10: sweep.schedule.metric: val_perplexity is logged for a language model, and model.kind = "
       "\"mlp\" is not one"},
      {"kind = \"asha\"\nmin_steps = 10\n", "log_every = 10\n", "",
       "FILE:19:1: sweep.schedule.metric: val_loss is logged at evaluations, and this config has none: set "
       "data.val and train.eval_every"},
      // A rung between the evaluations (or the log steps) that log the metric.
      {"kind = \"asha\"\nmin_steps = 15\n", kEval, "",
       "FILE:21:13: sweep.schedule.min_steps: rung 0 (step 15) falls between the steps that log val_loss "
       "(train.eval_every = 10): the rungs below train.steps (15, 45) must be multiples of it"},
      {"kind = \"asha\"\nmetric = \"loss\"\nmin_steps = 10\n", "log_every = 20\n", "",
       "FILE:22:13: sweep.schedule.min_steps: rung 0 (step 10) falls between the steps that log loss "
       "(train.log_every = 20): the rungs below train.steps (10, 30, 90) must be multiples of it"},
      // Too few trials for one to reach the last rung: 27 trials, 5 rungs at η = 4 need 256.
      {"kind = \"asha\"\nreduction_factor = 4\nmin_steps = 1\n", kEval, "",
       "FILE:22:13: sweep.schedule.min_steps: the rungs 1, 4, 16, 64, 100 need at least 4^4 trials for one to "
       "reach the last, and the sweep has 27: raise min_steps, lower reduction_factor or add trials"},
      {"kind = \"asha\"\nmin_steps = 10\nmax_steps = 90\n", kEval, "",
       "FILE:22:13: sweep.schedule.max_steps: is a [program]'s full budget; trainctl-runtime's trials train "
       "to train.steps"},
      // Early stopping would end a trial between its rungs.
      {"kind = \"asha\"\nmin_steps = 10\n", "eval_every = 10\nearly_stop = { patience = 3 }\n", "",
       "FILE:16:14: train.early_stop: [sweep.schedule] stops the trials at its rungs; early stopping would "
       "end one between them"},
      // What decides the rungs cannot differ between trials.
      {"kind = \"asha\"\nmin_steps = 10\n", "eval_every = 10\n", "\"train.eval_every\" = [10, 20]\n",
       "FILE:19:22: sweep.train.eval_every: decides where [sweep.schedule] judges the trials, which must be "
       "the same for all of them; it cannot be swept with a schedule"},
  };
  for (const Case& bad : cases) {
    CAPTURE(bad.schedule);
    CHECK(load_error(scheduled(bad.schedule, bad.train_keys, bad.extra)) == bad.error);
  }
}

TEST_CASE("a [program]'s schedule names its metric and its full budget, which {budget.steps} reads") {
  const std::string program = R"([job]
name = "own"

[program]
command = ["python3", "train.py", "--steps", "{budget.steps}"]

[sweep]
"params.lr" = [1, 2, 3]

[sweep.schedule]
kind = "halving"
min_steps = 5
)";
  CHECK(load_error(program + "metric = \"score\"\n") ==
        "FILE:10:1: sweep.schedule.max_steps: required with [program]: the steps of a full run, the last rung (your "
        "program reads each rung's budget from {budget.steps} or TRAINCTL_BUDGET_STEPS)");
  CHECK(load_error(program + "max_steps = 15\n") ==
        "FILE:10:1: sweep.schedule.metric: required with [program]: the key of the lines your program appends to "
        "metrics.jsonl that judges the trials, such as \"val_loss\" for {\"step\": 20, \"val_loss\": 1.3}");
  const trainctl::Config config = load_text(program + "max_steps = 15\nmetric = \"score\"\nmode = \"max\"\n");
  CHECK(config.program->reads_budget);
  CHECK(config.sweep->schedule->rungs == std::vector<int64_t>{5, 15});
  CHECK(trainctl::program_argv(*config.program, trainctl::RunLayout("/r"), 15)[3] == "15");
  CHECK_THROWS_WITH_AS(trainctl::program_argv(*config.program, trainctl::RunLayout("/r")),
                       "{budget.steps} has no value: TRAINCTL_BUDGET_STEPS is set by the batch script of a sweep with "
                       "[sweep.schedule]",
                       trainctl::BadInput);
  // Without a schedule there is no budget to fill in.
  CHECK(load_error(program.substr(0, program.find("[sweep]"))) ==
        "FILE:5:11: program.command: {budget.steps} is the step budget of a sweep's rung, and this config has no "
        "[sweep.schedule]");
}

TEST_CASE("the budget: synchronous halving's steps beside the full grid's, and node-hours at job.time") {
  SweepSchedule schedule = schedule_of(SweepSchedule::Kind::kAsha, {20, 60, 180, 540});
  schedule.metric = "val_loss";
  CHECK(trainctl::halving_trials_per_rung(schedule, 27) == std::vector<int64_t>{27, 9, 3, 1});
  CHECK(trainctl::halving_steps(schedule, 27) == 27 * 20 + 9 * 40 + 3 * 120 + 1 * 360);
  trainctl::JobSpec job;
  job.nodes = 2;
  job.time = "1:00:00";
  CHECK(trainctl::schedule_summary(schedule, 27, job) ==
        "schedule: asha on val_loss (min), reduction_factor 3: rungs at steps 20, 60, 180, 540\n"
        "  trials at each rung with synchronous halving: 27, 9, 3, 1\n"
        "  budget: 1620 steps, 11.1% of the full grid's 14580 (27 trials x 540 steps); ASHA trains at least that, more "
        "where it promotes early trials on fewer results\n"
        "  node-hours, were a full trial to take job.time (1:00:00) on 2 node(s): 6.00, against the full grid's 54.00\n");
}

TEST_CASE("halving promotes the best third of each complete rung, whatever the order of its results") {
  const SweepSchedule schedule = schedule_of(SweepSchedule::Kind::kHalving, {10, 30, 90});
  const std::vector<double> rung0{0.9, 0.3, 0.5, 0.7, 0.2, 0.8, 0.6, kNan, 0.4};
  const std::vector<double> rung1{0.35, 0.1, 0.45};  // of trials 1, 4 and 8, the best three
  std::vector<RungResult> first;
  for (int64_t t = 0; t < 9; ++t) first.push_back({t, 0, 10, rung0[static_cast<size_t>(t)]});
  std::mt19937_64 rng(5);
  std::vector<std::string> expected;
  for (int round = 0; round < 200; ++round) {
    std::vector<RungResult> log = first;
    std::shuffle(log.begin(), log.end(), rng);
    // Before the rung is complete nobody goes on.
    const std::vector<TrialRungs> partial =
        trainctl::decide_rungs(schedule, 9, std::vector<RungResult>(log.begin(), log.end() - 1));
    for (const TrialRungs& trial : partial) CHECK((trial.reached.empty() || !trial.reached[0].promoted));
    std::vector<RungResult> second{{1, 1, 30, rung1[0]}, {4, 1, 30, rung1[1]}, {8, 1, 30, rung1[2]}};
    std::shuffle(second.begin(), second.end(), rng);
    log.insert(log.end(), second.begin(), second.end());
    log.push_back({4, 2, 90, 0.05});
    const std::vector<std::string> decided = described(trainctl::decide_rungs(schedule, 9, log));
    if (expected.empty()) expected = decided;
    CHECK(decided == expected);
  }
  CHECK(expected == std::vector<std::string>{"0.9", "0.3+ 0.35", "0.5", "0.7", "0.2+ 0.1+ 0.05", "0.8", "0.6", "nan",
                                             "0.4+ 0.45"});
  const std::vector<TrialRungs> decided = trainctl::decide_rungs(schedule, 9, first);
  CHECK(trainctl::next_rung(decided[1], 3) == 1u);
  CHECK(trainctl::next_rung(decided[0], 3) == std::nullopt);
  CHECK(trainctl::next_rung(TrialRungs{}, 3) == 0u);
}

TEST_CASE("ASHA promotes as its rule replayed result by result does, and each rung's final best third") {
  for (const bool maximize : {false, true}) {
    const SweepSchedule schedule = schedule_of(SweepSchedule::Kind::kAsha, {1, 3, 9, 27}, 3, maximize);
    std::mt19937_64 rng(maximize ? 11 : 7);
    for (int round = 0; round < 100; ++round) {
      CAPTURE(round);
      const int64_t trials = 27 + round % 11;
      const std::vector<RungResult> log = random_log(schedule, trials, rng);
      const std::vector<TrialRungs> decided = trainctl::decide_rungs(schedule, trials, log);
      const std::vector<std::set<int64_t>> replayed = asha_by_replay(schedule, log);
      for (size_t rung = 0; rung + 1 < schedule.rungs.size(); ++rung) {
        std::set<int64_t> promoted;
        std::vector<std::pair<double, int64_t>> final_results;
        for (int64_t t = 0; t < trials; ++t) {
          const auto& reached = decided[static_cast<size_t>(t)].reached;
          if (reached.size() <= rung) continue;
          if (reached[rung].promoted) promoted.insert(t);
          const double value = reached[rung].value;
          final_results.push_back({!std::isfinite(value) ? INFINITY : maximize ? -value : value, t});
          if (!std::isfinite(value)) CHECK_FALSE(reached[rung].promoted);
        }
        CHECK(promoted == replayed[rung]);
        std::sort(final_results.begin(), final_results.end());
        for (size_t i = 0; i < final_results.size() / 3; ++i)
          if (std::isfinite(final_results[i].first)) CHECK(promoted.count(final_results[i].second) == 1);
      }
    }
  }
}

TEST_CASE("a result that is not the trial's next rung is ignored") {
  const SweepSchedule schedule = schedule_of(SweepSchedule::Kind::kAsha, {1, 3, 9});
  const std::vector<RungResult> log{{0, 0, 1, 0.5}, {0, 0, 1, 0.1},  // a second result for a rung
                                    {1, 1, 3, 0.2},                  // a rung never promoted to
                                    {7, 0, 1, 0.3},                  // no such trial
                                    {2, 0, 1, 0.4}, {1, 0, 1, 0.6}};
  CHECK(described(trainctl::decide_rungs(schedule, 3, log)) == std::vector<std::string>{"0.5", "0.6", "0.4+"});
}

TEST_CASE("the record of the rungs: appended whole, read in order, a line cut short skipped") {
  TempDir dir;
  const trainctl::SweepDir sweep(dir.path().string());
  CHECK(trainctl::read_rung_log(sweep).empty());
  trainctl::append_rung_result(sweep, {3, 0, 20, 0.8123});
  std::ofstream(sweep.rung_log(), std::ios::app) << R"({"trial":4,"rung":0,"st)";  // a crash mid-write
  trainctl::append_rung_result(sweep, {5, 1, 60, kNan});
  CHECK(read_text(sweep.rung_log()) == "{\"trial\":3,\"rung\":0,\"step\":20,\"value\":0.8123}\n"
                                       "{\"trial\":4,\"rung\":0,\"st\n"
                                       "{\"trial\":5,\"rung\":1,\"step\":60,\"value\":null}\n");
  const std::vector<RungResult> log = trainctl::read_rung_log(sweep);
  REQUIRE(log.size() == 2);
  CHECK(log[0].trial == 3);
  CHECK(log[0].value == 0.8123);
  CHECK(log[1].rung == 1);
  CHECK(log[1].step == 60);
  CHECK(std::isnan(log[1].value));
}

TEST_CASE("the sweep's lock is held by one process at a time") {
  TempDir dir;
  const trainctl::SweepDir sweep(dir.path().string());
  const auto try_lock_in_child = [&] {
    const pid_t child = fork();
    if (child == 0) {
      const int fd = open(sweep.lock().c_str(), O_RDWR);
      _exit(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  };
  {
    const trainctl::SweepLock lock(sweep);
    CHECK_FALSE(try_lock_in_child());
  }
  CHECK(try_lock_in_child());
}

TEST_CASE("the manifest keeps a sweep's schedule") {
  trainctl::SweepManifest manifest;
  manifest.name = "asha";
  manifest.config = "/c.toml";
  manifest.parameters = {"train.lr"};
  manifest.tasks = {trainctl::SweepTask{0, toml::array{0.1}}};
  manifest.arrays = {{"143", {0}, "arrays/array-0.sbatch", "submit", "", "2026-11-22T03:40:01Z"}};
  manifest.schedule = schedule_of(SweepSchedule::Kind::kHalving, {20, 60, 100}, 3, true);
  manifest.schedule->metric = "val_accuracy";
  const std::string text = trainctl::manifest_text(manifest);
  CHECK(text.find("[schedule]\nkind = 'halving'\nmetric = 'val_accuracy'\nmode = 'max'\nreduction_factor = 3\n"
                  "rungs = [ 20, 60, 100 ]\n") != std::string::npos);
  const trainctl::SweepManifest parsed = trainctl::parse_manifest(text, "manifest.toml");
  REQUIRE(parsed.schedule);
  CHECK(parsed.schedule->kind == SweepSchedule::Kind::kHalving);
  CHECK(parsed.schedule->metric == "val_accuracy");
  CHECK(parsed.schedule->maximize);
  CHECK(parsed.schedule->rungs == std::vector<int64_t>{20, 60, 100});
  CHECK_FALSE(trainctl::parse_manifest(text.substr(0, text.find("[schedule]")), "m.toml").schedule);
}

TEST_CASE("read_logged_values gives every value of a key, a program's own too, null as NaN") {
  TempDir dir;
  const std::string path = (dir.path() / "metrics.jsonl").string();
  std::ofstream(path) << R"({"step":10,"loss":0.5}
{"step":10,"val_loss":0.7,"score":3}
{"step":20,"score":null}
{"step":20,"score":"high"}
{"step":30,"score":4.5
{"step":30,"score":5.5}
)";
  const std::vector<trainctl::LoggedValue> values = trainctl::read_logged_values(path, "score");
  REQUIRE(values.size() == 3);
  CHECK(values[0].step == 10);
  CHECK(values[0].value == 3);
  CHECK(std::isnan(values[1].value));
  CHECK(values[2].value == 5.5);
  CHECK(trainctl::read_logged_values(path, "val_accuracy").empty());
}

namespace {

// Answers sbatch with job ids from 700 on (or fails it with FAKE_SBATCH_RC), squeue with no task,
// scontrol show config with MaxArraySize; records the sbatch calls.
class FakeSlurm : public trainctl::CommandRunner {
 public:
  trainctl::CommandResult run(const std::vector<std::string>& argv) override {
    if (argv[0] == "sbatch") {
      sbatch_calls.push_back(argv);
      if (refuse_sbatch) return {1, "", "sbatch: error: Batch job submission failed\n"};
      return {0, std::to_string(700 + sbatch_calls.size() - 1) + "\n", ""};
    }
    if (argv[0] == "squeue") return {0, "", ""};
    if (argv[0] == "scontrol") return {0, "MaxArraySize            = 1001\n", ""};
    return {127, "", "fake: unexpected command"};
  }
  std::vector<std::vector<std::string>> sbatch_calls;
  bool refuse_sbatch = false;
};

// A submitted ASHA sweep of three trials, η = 3, rungs at steps 10 and 30, max_parallel 1.
struct ScheduledSweep {
  TempDir dir;
  trainctl::SweepDir sweep{(dir.path() / "sweep").string()};
  trainctl::SweepManifest manifest;
  FakeSlurm runner;
  trainctl::SlurmClient slurm{runner};

  ScheduledSweep() {
    const std::string config = std::string(kMinimalConfig) + "eval_every = 10\n";
    fs::create_directories(sweep.path() + "/arrays");
    std::ofstream(sweep.config()) << config;
    manifest.name = "unit";
    manifest.config = sweep.config();
    manifest.parameters = {"train.lr"};
    manifest.max_parallel = 1;
    manifest.schedule = schedule_of(SweepSchedule::Kind::kAsha, {10, 30});
    manifest.schedule->metric = "val_loss";
    for (int64_t task = 0; task < 3; ++task) {
      manifest.tasks.push_back(trainctl::SweepTask{task, toml::array{0.1 * static_cast<double>(task + 1)}});
      sweep.task(task).prepare({config}, /*resume=*/false);
    }
    manifest.arrays = {{"100", {0, 1, 2}, "arrays/array-0.sbatch", "submit", "", "2026-11-22T00:00:00Z"}};
    trainctl::write_manifest(sweep, manifest);
  }
  void log_value(int64_t task, int64_t step, const std::string& value) const {
    std::ofstream(sweep.task(task).metrics(), std::ios::app) << fmt::format("{{\"step\":{},\"val_loss\":{}}}\n", step, value);
  }
  std::string step(int64_t task, trainctl::RungEvent event, int64_t budget = 0) {
    return trainctl::take_rung_step(sweep, task, event, budget, slurm).line();
  }
  std::string outcome(int64_t task) const { return read_text(sweep.task(task).outcome()); }
  // Trials 0, 1 and 2 reach the first rung with 0.5, 0.3 and 0.4, in that order: trial 1 goes on,
  // promoted from the rung it stopped at.
  void reach_first_rung() {
    const char* values[] = {"0.5", "0.3", "0.4"};
    for (int64_t task : {0, 1, 2}) {
      log_value(task, 10, values[task]);
      step(task, trainctl::RungEvent::kReached, 10);
    }
  }
};

}  // namespace

TEST_CASE("a trial's step at its rungs: record, stop, promote from a stopped rung into a new array") {
  ScheduledSweep fixture;
  using trainctl::RungEvent;
  CHECK(fixture.step(0, RungEvent::kStart) == "train 10");
  // A [program]'s launcher marks every good end complete; only the last rung is one.
  std::ofstream(fixture.sweep.task(0).completed()) << "10\n";
  fixture.log_value(0, 10, "0.5");
  CHECK(fixture.step(0, RungEvent::kReached, 10) == "stop 0");
  CHECK(fixture.outcome(0) == "stopped at rung 0 (step 10): val_loss 0.5\n");
  CHECK_FALSE(fs::exists(fixture.sweep.task(0).completed()));
  // Asked again (a requeued task), the same answer; nothing recorded twice.
  CHECK(fixture.step(0, RungEvent::kStart) == "stop 0");

  fixture.log_value(1, 10, "0.3");
  CHECK(fixture.step(1, RungEvent::kReached, 10) == "stop 0");
  CHECK(fixture.runner.sbatch_calls.empty());
  // The third result makes the best of three, trial 1, go on: in a new array, after array 100
  // (max_parallel) were it still running; it is not.
  std::ofstream(fixture.sweep.task(1).outcome(), std::ios::app) << "requeued: saved at step 4\n";
  fixture.log_value(2, 10, "0.4");
  CHECK(fixture.step(2, RungEvent::kReached, 10) == "stop 0");
  REQUIRE(fixture.runner.sbatch_calls.size() == 1);
  const trainctl::SweepManifest manifest = trainctl::read_manifest(fixture.sweep);
  REQUIRE(manifest.arrays.size() == 2);
  CHECK(manifest.arrays[1].job_id == "700");
  CHECK(manifest.arrays[1].tasks == std::vector<int64_t>{1});
  CHECK(manifest.arrays[1].reason == "promoted");
  CHECK(read_text(fixture.sweep.path() + "/" + manifest.arrays[1].script).find("sweep rung") != std::string::npos);
  // A new submission: its earlier requeues are forgotten.
  CHECK(fixture.outcome(1) == "promoted at rung 0 (step 10)\n");
  CHECK(read_text(fixture.sweep.rung_log()) == "{\"trial\":0,\"rung\":0,\"step\":10,\"value\":0.5}\n"
                                               "{\"trial\":1,\"rung\":0,\"step\":10,\"value\":0.3}\n"
                                               "{\"trial\":2,\"rung\":0,\"step\":10,\"value\":0.4}\n");

  CHECK(fixture.step(1, RungEvent::kStart) == "train 30");
  // Ranks that end at their budget without the metric there fail the task.
  const std::string no_metric = fmt::format("task 1's ranks ended at its budget, step 30, and {} logs no val_loss there",
                                            fixture.sweep.task(1).metrics());
  CHECK_THROWS_WITH_AS(fixture.step(1, RungEvent::kReached, 30), no_metric.c_str(), trainctl::Failure);
  fixture.log_value(1, 30, "0.25");
  CHECK(fixture.step(1, RungEvent::kReached, 30) == "complete");
  CHECK(fixture.runner.sbatch_calls.size() == 1);
}

TEST_CASE("a trial whose metric went non-finite is stopped, not failed; other failures stand") {
  ScheduledSweep fixture;
  using trainctl::RungEvent;
  CHECK(fixture.step(0, RungEvent::kRanksFailed) == "failed");
  std::ofstream(fixture.sweep.task(0).metrics(), std::ios::app) << "{\"step\":7,\"loss\":null}\n";
  CHECK(fixture.step(0, RungEvent::kRanksFailed) == "stop 0");
  CHECK(fixture.outcome(0) == "stopped at rung 0 (step 10): val_loss not finite\n");
  // A non-finite value at the rung stops the trial as the worst.
  fixture.log_value(1, 10, "null");
  CHECK(fixture.step(1, RungEvent::kReached, 10) == "stop 0");
  fixture.log_value(2, 10, "0.9");
  CHECK(fixture.step(2, RungEvent::kReached, 10) == "train 30");
  CHECK(fixture.runner.sbatch_calls.empty());
}

TEST_CASE("a promotion sbatch refused stays to submit: at the next rung's end, or by resubmit --failed") {
  ScheduledSweep fixture;
  using trainctl::RungEvent;
  fixture.runner.refuse_sbatch = true;
  for (int64_t task : {0, 1, 2}) fixture.log_value(task, 10, task == 0 ? "0.1" : "0.5");
  CHECK(fixture.step(0, RungEvent::kReached, 10) == "stop 0");
  CHECK(fixture.step(1, RungEvent::kReached, 10) == "stop 0");
  CHECK(fixture.step(2, RungEvent::kReached, 10) == "stop 0");
  CHECK(fixture.outcome(0) == "stopped at rung 0 (step 10): promoted, not yet submitted\n");
  const std::vector<TrialRungs> decided = trainctl::decide_rungs(
      *fixture.manifest.schedule, 3, trainctl::read_rung_log(fixture.sweep));
  CHECK(trainctl::unsubmitted_promotions(fixture.sweep, decided, 2) == std::vector<int64_t>{0});
  fixture.runner.refuse_sbatch = false;
  CHECK(fixture.step(2, RungEvent::kStart) == "stop 0");
  CHECK(fixture.outcome(0) == "promoted at rung 0 (step 10)\n");
  CHECK(trainctl::unsubmitted_promotions(fixture.sweep, decided, 2).empty());
}

TEST_CASE("a scheduled sweep's status: trial states, ranked by rung, its rungs in JSON") {
  ScheduledSweep fixture;
  using trainctl::RungEvent;
  fixture.reach_first_rung();
  std::vector<trainctl::TaskStatus> statuses =
      trainctl::read_sweep_status(fixture.sweep, trainctl::read_manifest(fixture.sweep),
                                  std::vector<trainctl::ArrayTaskInfo>{{"700", 0, "PENDING", "Dependency", 0}});
  CHECK(trainctl::default_rank_metric(statuses) == trainctl::RankMetric::kRung);
  const SweepSchedule& schedule = *fixture.manifest.schedule;
  CHECK(trainctl::trial_state(statuses[0], schedule) == "stopped at rung 0");
  CHECK(trainctl::trial_state(statuses[1], schedule) == "promoted");
  CHECK(statuses[0].run.state == "STOPPED");
  CHECK_FALSE(trainctl::needs_resubmission(statuses[0]));
  CHECK(trainctl::trial_steps(statuses[2], schedule) == 10);

  fixture.log_value(1, 30, "0.35");
  fixture.step(1, RungEvent::kStart);
  statuses = trainctl::read_sweep_status(fixture.sweep, trainctl::read_manifest(fixture.sweep), std::nullopt);
  trainctl::rank_tasks(statuses, trainctl::RankMetric::kRung);
  // The highest rung first, whatever its value; then the rung below by value.
  CHECK(statuses[0].task == 1);
  CHECK(statuses[1].task == 2);
  CHECK(statuses[2].task == 0);
  trainctl::rank_tasks(statuses, trainctl::RankMetric::kRung, /*maximize=*/true);
  CHECK(statuses[1].task == 0);
  const trainctl::Json rows = trainctl::Json::parse(
      trainctl::sweep_status_json(trainctl::read_manifest(fixture.sweep), statuses, trainctl::RankMetric::kRung));
  CHECK(rows[0]["task"] == 1);
  CHECK(rows[0]["steps_trained"] == 30);
  CHECK(rows[0]["rungs"].dump() == R"([{"step":10,"value":0.3,"promoted":true},{"step":30,"value":0.35,"promoted":false}])");
  CHECK(rows[1]["task"] == 0);
  CHECK(rows[1]["state"] == "stopped at rung 0");
  CHECK(rows[1]["rungs"].dump() == R"([{"step":10,"value":0.5,"promoted":false}])");
}

TEST_CASE("a trial stopped at a rung is STOPPED; one promoted into a new array has not ended") {
  trainctl::RunStatus stopped;
  stopped.outcome = "stopped at rung 1 (step 60): val_loss 0.8";
  stopped.job_id = "55_1";
  trainctl::settle_state(stopped, trainctl::SlurmView{"COMPLETED", "None", 0});
  CHECK(stopped.state == "STOPPED");
  trainctl::RunStatus promoted;
  promoted.outcome = "promoted at rung 1 (step 60)";
  promoted.job_id = "55_1";
  trainctl::settle_state(promoted, trainctl::SlurmView{"PENDING", "Dependency", 0});
  CHECK(promoted.state == "PENDING");
  trainctl::settle_state(promoted, std::nullopt);
  CHECK(promoted.state == "UNKNOWN");
}

TEST_CASE("record_outcome replaces the first line and keeps the earlier requeues") {
  TempDir dir;
  const trainctl::RunDir run((dir.path() / "run").string());
  run.prepare({"[job]\n"}, /*resume=*/false);
  std::ofstream(run.outcome()) << "running\nrequeued: saved at step 5\nrequeued: killed by signal 9 at step 2\n";
  run.record_outcome("stopped at rung 0 (step 10): val_loss 0.5");
  CHECK(read_text(run.outcome()) ==
        "stopped at rung 0 (step 10): val_loss 0.5\nrequeued: saved at step 5\nrequeued: killed by signal 9 at step 2\n");
}

TEST_CASE("a scheduled sweep's chart: each trial's metric, the rungs marked, the best highlighted, the stopped faint") {
  ScheduledSweep fixture;
  using trainctl::RungEvent;
  fixture.reach_first_rung();
  fixture.log_value(1, 20, "0.32");
  fixture.log_value(1, 30, "0.25");
  fixture.step(1, RungEvent::kReached, 30);
  const trainctl::LineChart chart = trainctl::sweep_loss_chart(fixture.sweep, "runs/unit");
  CHECK(chart.title == "runs/unit: asha on val_loss, 3 trials; best: task 1, 0.25 at step 30");
  CHECK(chart.left_label == "val_loss");
  REQUIRE(chart.series.size() == 5);
  CHECK(chart.series[0].highlighted);  // task 1, ranked first
  CHECK(chart.series[0].points.size() == 3);
  CHECK_FALSE(chart.series[0].faint);
  CHECK(chart.series[1].faint);
  CHECK(chart.series[2].faint);
  // The rungs span the values drawn.
  CHECK(chart.series[3].points.front().x == 10);
  CHECK(chart.series[3].points.front().y == 0.25);
  CHECK(chart.series[4].points.back().x == 30);
  CHECK(chart.series[4].points.back().y == 0.5);
  CHECK(chart.legend[0].text == "rungs (steps 10, 30)");
  CHECK(chart.legend[1].text == "task 1 (best): train.lr=0.2");
  CHECK(chart.legend[2].text == "task 2 (stopped at rung 0): train.lr=0.30000000000000004");
}

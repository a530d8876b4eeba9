// [sweep.schedule]: see sweep_schedule.h.
#include "sweeps/sweep_schedule.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "registry.h"
#include "sweeps/sweep.h"

namespace trainctl {

namespace {

// The runtime's keys that decide where its metrics are logged, or how far it trains: the rungs
// of every trial must be the same.
const std::vector<std::string> kRungKeys{"train.steps", "train.eval_every", "train.log_every",
                                         "train.early_stop", "data.val", "model.kind"};
const std::vector<std::string> kValidationMetrics{"val_loss", "val_accuracy", "val_perplexity"};

bool is_validation_metric(const std::string& metric) {
  return std::find(kValidationMetrics.begin(), kValidationMetrics.end(), metric) != kValidationMetrics.end();
}

// Whether trainctl-runtime logs `metric` for `run`'s model at all; throws at sweep.schedule.metric
// when it never does.
void check_runtime_metric(const SweepSchedule& schedule, const RunSpec& run, TableReader& reader) {
  const std::string& metric = schedule.metric;
  if (metric != "loss" && !is_validation_metric(metric))
    reader.fail("metric", fmt::format("trainctl-runtime logs no \"{}\"; it logs loss, val_loss, val_accuracy and, for "
                                      "a language model, val_perplexity",
                                      metric));
  if (is_validation_metric(metric) && (!run.data.val || run.train.eval_every == 0))
    reader.fail("metric", fmt::format("{} is logged at evaluations, and this config has none: set data.val and "
                                      "train.eval_every",
                                      metric));
  if (metric == "val_perplexity") {
    ModelOptions options;
    options.max_examples = run.train.micro_batch;
    if (std::string_view(model_kind(run.model).footprint(run.model, options).term_unit) != "tokens")
      reader.fail("metric", fmt::format("val_perplexity is logged for a language model, and model.kind = \"{}\" is "
                                        "not one",
                                        run.model.kind()));
  }
}

}  // namespace

std::optional<SweepSchedule> read_sweep_schedule(TableReader& sweep) {
  TableReader reader = sweep.table("schedule");
  if (!reader.present()) return std::nullopt;
  SweepSchedule schedule;
  schedule.kind = reader.choice("kind", {"asha", "halving"}) == "asha" ? SweepSchedule::Kind::kAsha
                                                                      : SweepSchedule::Kind::kHalving;
  schedule.metric_written = reader.has("metric");
  schedule.metric = reader.string("metric", schedule.metric);
  if (schedule.metric.empty()) reader.fail("metric", "is empty; name a key that the trials log, such as \"val_loss\"");
  schedule.maximize = reader.choice("mode", {"min", "max"}, "min") == "max";
  schedule.reduction_factor = reader.integer("reduction_factor", schedule.reduction_factor, 2, 1000);
  schedule.min_steps = reader.integer("min_steps", std::nullopt, 1);
  if (reader.has("max_steps")) schedule.max_steps = reader.integer("max_steps", std::nullopt, 1);
  reader.reject_unknown();
  return schedule;
}

std::vector<int64_t> rung_steps(int64_t min_steps, int64_t reduction_factor, int64_t full_steps) {
  std::vector<int64_t> rungs;
  for (int64_t rung = min_steps; rung < full_steps;) {
    rungs.push_back(rung);
    // The next rung would pass full_steps (and might not fit int64) when this one is above its η-th.
    if (rung > full_steps / reduction_factor) break;
    rung *= reduction_factor;
  }
  rungs.push_back(full_steps);
  return rungs;
}

void fit_schedule(SweepSchedule& schedule, const ScheduleSubject& subject) {
  TableReader sweep = TableReader::child(subject.root, "sweep", subject.file);
  TableReader reader = sweep.table("schedule");
  if (subject.run)
    for (const SweepParameter& parameter : subject.swept)
      if (std::find(kRungKeys.begin(), kRungKeys.end(), parameter.path) != kRungKeys.end())
        throw ConfigError(parameter.position, "sweep." + parameter.path,
                          "decides where [sweep.schedule] judges the trials, which must be the same for all of them; "
                          "it cannot be swept with a schedule");

  int64_t full_steps = 0;
  if (subject.run) {
    if (schedule.max_steps)
      reader.fail("max_steps", "is a [program]'s full budget; trainctl-runtime's trials train to train.steps");
    full_steps = subject.run->train.steps;
  } else {
    if (!schedule.max_steps)
      reader.fail("max_steps", "required with [program]: the steps of a full run, the last rung (your program reads "
                               "each rung's budget from {budget.steps} or TRAINCTL_BUDGET_STEPS)");
    if (!schedule.metric_written)
      reader.fail("metric", "required with [program]: the key of the lines your program appends to metrics.jsonl that "
                            "judges the trials, such as \"val_loss\" for {\"step\": 20, \"val_loss\": 1.3}");
    full_steps = *schedule.max_steps;
  }
  const std::string full_name = subject.run ? "train.steps" : "max_steps";
  if (schedule.min_steps >= full_steps)
    reader.fail("min_steps", fmt::format("the first rung ({}) must come before the full budget ({} = {})",
                                         schedule.min_steps, full_name, full_steps));
  schedule.rungs = rung_steps(schedule.min_steps, schedule.reduction_factor, full_steps);

  // η^(rungs - 1) trials let one reach the last rung, each rung keeping ⌊n / η⌋: a count of them
  // at each rung that reaches 0 before the last stops every trial there.
  if (halving_trials_per_rung(schedule, subject.trials).back() == 0)
    reader.fail("min_steps", fmt::format("the rungs {} need at least {}^{} trials for one to reach the last, and the "
                                         "sweep has {}: raise min_steps, lower reduction_factor or add trials",
                                         fmt::join(schedule.rungs, ", "), schedule.reduction_factor,
                                         schedule.rungs.size() - 1, subject.trials));
  if (!subject.run) return;

  const RunSpec& run = *subject.run;
  check_runtime_metric(schedule, run, reader);
  const bool validation = is_validation_metric(schedule.metric);
  const int64_t interval = validation ? run.train.eval_every : run.train.log_every;
  for (size_t rung = 0; rung + 1 < schedule.rungs.size(); ++rung)
    if (schedule.rungs[rung] % interval != 0)
      reader.fail("min_steps",
                  fmt::format("rung {} (step {}) falls between the steps that log {} (train.{} = {}): the rungs below "
                              "train.steps ({}) must be multiples of it",
                              rung, schedule.rungs[rung], schedule.metric, validation ? "eval_every" : "log_every",
                              interval,
                              fmt::join(schedule.rungs.begin(), schedule.rungs.end() - 1, ", ")));
  if (run.train.early_stop)
    TableReader::child(subject.root, "train", subject.file)
        .fail("early_stop", "[sweep.schedule] stops the trials at its rungs; early stopping would end one between "
                            "them");
}

std::vector<int64_t> halving_trials_per_rung(const SweepSchedule& schedule, int64_t trials) {
  std::vector<int64_t> counts;
  for (size_t rung = 0; rung < schedule.rungs.size(); ++rung)
    counts.push_back(rung == 0 ? trials : counts.back() / schedule.reduction_factor);
  return counts;
}

int64_t halving_steps(const SweepSchedule& schedule, int64_t trials) {
  const std::vector<int64_t> counts = halving_trials_per_rung(schedule, trials);
  int64_t steps = 0;
  for (size_t rung = 0; rung < counts.size(); ++rung)
    steps += counts[rung] * (schedule.rungs[rung] - (rung == 0 ? 0 : schedule.rungs[rung - 1]));
  return steps;
}

std::string schedule_summary(const SweepSchedule& schedule, int64_t trials, const JobSpec& job) {
  const int64_t full_steps = schedule.rungs.back();
  const int64_t grid_steps = trials * full_steps;
  const int64_t steps = halving_steps(schedule, trials);
  const double share = static_cast<double>(steps) / static_cast<double>(grid_steps);
  std::string text = fmt::format("schedule: {} on {} ({}), reduction_factor {}: rungs at steps {}\n",
                                 schedule.kind_name(), schedule.metric, schedule.mode_name(), schedule.reduction_factor,
                                 fmt::join(schedule.rungs, ", "));
  text += fmt::format("  trials at each rung with synchronous halving: {}\n",
                      fmt::join(halving_trials_per_rung(schedule, trials), ", "));
  text += fmt::format("  budget: {} steps, {:.1f}% of the full grid's {} ({} trials x {} steps){}\n", steps,
                      100 * share, grid_steps, trials, full_steps,
                      schedule.kind == SweepSchedule::Kind::kAsha
                          ? "; ASHA trains at least that, more where it promotes early trials on fewer results"
                          : "");
  if (job.time) {
    // Node-hours grow with the steps: the full grid's, were each full trial to take all of job.time.
    const double grid_hours = static_cast<double>(trials * job.nodes) *
                              static_cast<double>(*time_limit_seconds(*job.time)) / 3600.0;
    text += fmt::format("  node-hours, were a full trial to take job.time ({}) on {} node(s): {:.2f}, against the full "
                        "grid's {:.2f}\n",
                        *job.time, job.nodes, grid_hours * share, grid_hours);
  }
  return text;
}

}  // namespace trainctl

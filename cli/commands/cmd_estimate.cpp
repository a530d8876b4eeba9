// trainctl estimate CONFIG [--measure N]: what a config's run needs before it waits in a queue.
// Parameters, each rank's memory by component (estimate/memory_estimate.h: with and without recompute
// where the model has it), a rank's model state under each train.zero side by side, and the
// training FLOPs per step, from the model registry's footprints and the data files' headers. With --measure N, N steps timed on this machine, turned into the
// run's expected duration, a job.time and a checkpoint interval. Warnings (exit 0): job.mem or
// job.gpu_memory below the estimate (which validate, render and submit refuse); measured, a signal_grace shorter than
// one step plus one checkpoint write.
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "commands.h"
#include "config_file.h"
#include "errors.h"
#include "exit_codes.h"
#include "runs/local_runtime.h"
#include "estimate/memory_estimate.h"
#include "metrics_file.h"
#include "preflight.h"

namespace trainctl {

namespace {

// --measure's suggestions. The time limit covers the measured duration with this margin (other
// nodes, the gradient all-reduce of several ranks, a busier filesystem), then signal_grace (the
// run should end before its signal) and SLURM's 30 s time-limit check.
constexpr double kTimeMargin = 1.25;
constexpr int64_t kSlurmCheckSeconds = 30;
// A checkpoint bounds what a crash loses to the steps since it was written. Writing one costs at
// most this share of the time between two, and they come at most this often: a fast model
// would otherwise write every few steps, loading a shared filesystem for little gain.
constexpr double kCheckpointTimeShare = 0.02;
constexpr double kMinCheckpointIntervalSeconds = 300.0;

// The memory table's names are at least this wide, so that its columns stay where they were.
constexpr size_t kMinNameWidth = 34;

std::string mib(int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / kMiB); }

void print_estimate(const Config& config, const MemoryEstimate& estimate) {
  const RunSpec& run = *config.run;
  const ModelFootprint& model = estimate.model;
  const int64_t world = config.job.world_size();
  const int64_t global_batch = run.train.micro_batch * run.train.grad_accum * world;
  const int64_t terms_per_step = global_batch * model.terms_per_example;
  const double flops_per_step = model.training_flops_per_term * static_cast<double>(terms_per_step);
  fmt::print("{}: {}; {} node(s) x {} rank(s), global batch {}\n", config.path, run.model.describe(),
             config.job.nodes, config.job.ranks_per_node, global_batch);
  fmt::print("parameters: {}\n", model.parameters);
  fmt::print("training FLOPs per step: {:.3g} ({:.3g} per {} x {} {} per step; {:.3g} per rank)\n", flops_per_step,
             model.training_flops_per_term, model.term_unit == std::string_view("tokens") ? "token" : "sample",
             terms_per_step, model.term_unit, flops_per_step / static_cast<double>(world));

  fmt::print("\n");
  const char* configured = run.train.recompute ? "recompute on" : "recompute off";
  const char* other = run.train.recompute ? "recompute off" : "recompute on";
  // Wide enough for the longest name (ZeRO-1's optimizer state says what it is a share of).
  size_t name_width = kMinNameWidth;
  for (const MemoryComponent& component : estimate.memory) name_width = std::max(name_width, component.name.size());
  if (estimate.other_recompute)
    fmt::print("{:<{}}{:>16}{:>16}\n", "memory per rank (MiB)", name_width + 2, fmt::format("{} *", configured),
               other);
  else
    fmt::print("memory per rank (MiB)\n");
  auto row = [&](const std::string& name, int64_t bytes, std::optional<int64_t> other_bytes) {
    fmt::print("  {:<{}}{:>16}{}\n", name, name_width, mib(bytes),
               other_bytes ? fmt::format("{:>16}", mib(*other_bytes)) : "");
  };
  for (size_t i = 0; i < estimate.memory.size(); ++i)
    row(estimate.memory[i].name, estimate.memory[i].bytes,
        estimate.other_recompute ? std::optional((*estimate.other_recompute)[i].bytes) : std::nullopt);
  row("total", total_bytes(estimate.memory),
      estimate.other_recompute ? std::optional(total_bytes(*estimate.other_recompute)) : std::nullopt);
  if (estimate.other_recompute) fmt::print("* as configured (train.recompute = {})\n", run.train.recompute);
  if (!run.checkpoint.sharded) fmt::print("ranks other than 0 need the total less the checkpoint staging.\n");
  const int64_t mapped = total_bytes(estimate.memory, [](const MemoryComponent& c) { return c.once_per_node; });
  if (mapped > 0)
    fmt::print("the mapped data ({} MiB) are in each rank's resident set but held once a node (the page cache), "
               "so {} rank(s) of a node need {} MiB of host memory.\n",
               mib(mapped), config.job.ranks_per_node, mib(node_host_bytes(config.job, estimate.memory)));
  if (!estimate.data_read) fmt::print("data: the files were not read (--no-preflight); only one batch is counted.\n");
  if (run.train.device != "cpu")
    fmt::print("train.device = \"{}\": weights, gradients, optimizer state, activations and the GEMM workspace are "
               "its memory, the rest ({} MiB) the host's; the device runtime's own memory is not counted.\n",
               run.train.device, mib(total_bytes(estimate.memory, [](const MemoryComponent& c) { return !c.device; })));
}

// A rank's model state and activations under each train.zero: what sharding saves, and what
// its gathered and reduced layers' buffers cost.
void print_zero_modes(const Config& config, const MemoryEstimate& estimate) {
  const RunSpec& run = *config.run;
  struct Row {
    const char* name;
    int64_t TrainingMemory::*bytes;
  };
  constexpr Row kRows[] = {
      {"weights", &TrainingMemory::weights},
      {"gradients", &TrainingMemory::gradients},
      {"optimizer state", &TrainingMemory::optimizer_state},
      {"weights' bf16 compute copy", &TrainingMemory::compute_copy},
      {"gathered layers", &TrainingMemory::gathered_layers},
      {"layers' gradients", &TrainingMemory::layer_gradients},
      {"activations", &TrainingMemory::activations},
      {"GEMM workspace (cuBLASLt)", &TrainingMemory::gemm_workspace},
  };
  fmt::print("\n{:<{}}", fmt::format("by train.zero, {} rank(s) (MiB)", config.job.world_size()), kMinNameWidth + 2);
  for (int64_t zero = 0; zero < 4; ++zero)
    fmt::print("{:>10}", fmt::format("zero {}{}", zero, zero == run.train.zero ? " *" : ""));
  fmt::print("\n");
  const auto row = [&](const char* name, const auto& bytes_of) {
    fmt::print("  {:<{}}", name, kMinNameWidth);
    for (const TrainingMemory& memory : estimate.by_zero) fmt::print("{:>10}", mib(bytes_of(memory)));
    fmt::print("\n");
  };
  for (const Row& each : kRows)
    if (std::any_of(estimate.by_zero.begin(), estimate.by_zero.end(),
                    [&](const TrainingMemory& memory) { return memory.*each.bytes > 0; }))
      row(each.name, [&](const TrainingMemory& memory) { return memory.*each.bytes; });
  row("sum", [](const TrainingMemory& memory) { return memory.device_bytes(); });
  fmt::print("* as configured; {}\n",
             run.train.device == "cpu" ? "all of it host memory on the CPU"
                                       : fmt::format("what a rank holds in train.device = \"{}\"'s memory{}",
                                                     run.train.device,
                                                     config.job.gpu_memory
                                                         ? fmt::format(" (job.gpu_memory = {})", *config.job.gpu_memory)
                                                         : ""));
}

void warn_about_memory(const Config& config, const MemoryEstimate& estimate) {
  if (const std::optional<ConfigError> refusal = job_mem_refusal(config.table, config.path, config.job, estimate))
    fmt::print(stderr, "warning: {}; validate, render and submit refuse this config\n", refusal->what());
  if (const std::optional<ConfigError> refusal =
          gpu_memory_refusal(config.table, config.path, config.job, *config.run, estimate))
    fmt::print(stderr, "warning: {}; validate, render and submit refuse this config\n", refusal->what());
}

// --- --measure -----------------------------------------------------------------------------

struct Measurement {
  std::vector<double> step_seconds;  // per step, in order
  double checkpoint_seconds = 0.0;
  double checkpoint_megabytes = 0.0;
  double wall_seconds = 0.0;       // the runtime from start to exit
  int64_t peak_rss_bytes = 0;      // the kernel's, the checkpoint write included

  // The first step warms up (first touches of every buffer, OpenBLAS's set-up): left out when
  // there are others.
  double step_time() const {
    const auto first = step_seconds.size() > 1 ? step_seconds.begin() + 1 : step_seconds.begin();
    return std::accumulate(first, step_seconds.end(), 0.0) / static_cast<double>(step_seconds.end() - first);
  }
  // Start-up, the final validation and shutdown: what is neither a step nor the checkpoint.
  double overhead_seconds() const {
    return std::max(0.0, wall_seconds - std::accumulate(step_seconds.begin(), step_seconds.end(), 0.0) -
                             checkpoint_seconds);
  }
};

// The config with train.steps = `steps`, a metrics line per step and one checkpoint, at the end;
// nothing else that takes time between steps (evaluation, timed checkpoints, early stopping,
// which needs evaluation).
toml::table measuring_config(toml::table table, int64_t steps) {
  toml::table& train = *table["train"].as_table();
  train.insert_or_assign("steps", steps);
  train.insert_or_assign("log_every", 1);
  train.insert_or_assign("warmup_steps", std::min(train["warmup_steps"].value_or(int64_t{0}), steps));
  train.erase("eval_every");
  train.erase("early_stop");
  if (!table.contains("checkpoint")) table.insert("checkpoint", toml::table{});
  toml::table& checkpoint = *table["checkpoint"].as_table();
  checkpoint.erase("every_steps");
  checkpoint.erase("every_minutes");
  return table;
}

std::string last_lines(const std::string& path, size_t count) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const size_t first = lines.size() > count ? lines.size() - count : 0;
  std::string text;
  for (size_t i = first; i < lines.size(); ++i) text += "\n  " + lines[i];
  return text;
}

void read_metrics(const std::string& path, Measurement& measurement) {
  for (const MetricsLine& line : read_metrics_file(path)) {
    if (line.train && std::isfinite(line.train->step_seconds)) measurement.step_seconds.push_back(line.train->step_seconds);
    if (line.checkpoint) {
      measurement.checkpoint_megabytes = line.checkpoint->megabytes;
      measurement.checkpoint_seconds = line.checkpoint->seconds;
    }
  }
  if (measurement.step_seconds.empty() || measurement.checkpoint_seconds <= 0.0)
    throw Failure(fmt::format("the measuring run logged no step times or no checkpoint in {}", path));
}

// A directory of its own under the system's temporary directory, removed with this object.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "trainctl-estimate.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw Failure(fmt::format("cannot create a directory like {}: {}", pattern, std::strerror(errno)));
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Trains `steps` steps of `config` on one rank here, in a run directory that is removed after.
Measurement measure(const Config& config, int64_t steps) {
  const TemporaryDirectory directory;
  const RunDir run_dir((directory.path() / "run").string());
  run_dir.prepare(run_files(measuring_config(config.table, steps), config.path,
                            fmt::format("trainctl estimate --measure {}", steps)),
                  false);
  const std::string log = (directory.path() / "runtime.log").string();
  export_thread_counts(config.job);
  fmt::print(stderr, "measuring {} step(s) of one rank with {} thread(s) on this machine...\n", steps,
             std::getenv("OPENBLAS_NUM_THREADS"));
  const auto started = std::chrono::steady_clock::now();
  const ProcessEnd end = run_runtime_locally(run_dir, 1, log);
  Measurement measurement;
  measurement.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (end == ProcessEnd::exited(exit_code::kBadConfig))
    throw UsageError(fmt::format("the runtime rejected its input:{}", last_lines(log, 20)));
  if (end != ProcessEnd::exited(exit_code::kDone))
    throw Failure(fmt::format("the measuring run {}:{}", end.description(), last_lines(log, 20)));
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  measurement.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux counts KiB
  read_metrics(run_dir.metrics(), measurement);
  return measurement;
}

// Checkpoints a run writes: every_steps's, every_minutes's over `seconds` of training, and the
// final one (which a scheduled one at the last step is).
int64_t checkpoint_count(const RunSpec& run, double seconds) {
  const CheckpointSpec& checkpoint = run.checkpoint;
  int64_t count = checkpoint.every_steps > 0 ? (run.train.steps - 1) / checkpoint.every_steps : 0;
  if (checkpoint.every_minutes > 0.0) count += static_cast<int64_t>(seconds / (checkpoint.every_minutes * 60.0));
  return count + 1;
}

std::string duration_text(double seconds) {
  if (seconds < 120.0) return fmt::format("{:.1f} s", seconds);
  if (seconds < 7200.0) return fmt::format("{:.1f} min", seconds / 60.0);
  return fmt::format("{:.1f} h", seconds / 3600.0);
}

void print_measurement(const Config& config, const MemoryEstimate& estimate, const Measurement& measured) {
  const RunSpec& run = *config.run;
  const double step = measured.step_time();
  const size_t steps = measured.step_seconds.size();
  const int64_t world = config.job.world_size();
  fmt::print("\nmeasured here: {} step(s) of one rank{}\n", steps,
             world > 1 ? fmt::format(" (each of the {} ranks does as much; their gradient all-reduce is not measured)",
                                     world)
                       : "");
  if (steps == 1)
    fmt::print("  step time: {:.3f} s (one step, warm-up included)\n", step);
  else
    fmt::print("  step time: {:.3f} s ({}; the first took {:.3f} s)\n", step,
               steps == 2 ? "step 2" : fmt::format("mean of steps 2 to {}", steps), measured.step_seconds.front());
  fmt::print("  checkpoint write: {:.3f} s ({:.1f} MB)\n", measured.checkpoint_seconds, measured.checkpoint_megabytes);
  fmt::print("  start-up, final validation and shutdown: {:.1f} s\n", measured.overhead_seconds());
  const int64_t estimated = total_bytes(estimate.memory);
  const auto peak = static_cast<double>(measured.peak_rss_bytes);
  fmt::print("  peak RSS: {} MiB measured, {} MiB estimated ({:+.1f}%)\n", mib(measured.peak_rss_bytes),
             mib(estimated), 100.0 * (static_cast<double>(estimated) - peak) / peak);

  const double training = step * static_cast<double>(run.train.steps);
  const int64_t checkpoints = checkpoint_count(run, training);
  const double duration = training + static_cast<double>(checkpoints) * measured.checkpoint_seconds +
                          measured.overhead_seconds();
  const bool evaluates = run.data.val && run.train.eval_every > 0;
  fmt::print("  expected duration of {} steps: {} ({} checkpoint write(s) included{})\n", run.train.steps,
             duration_text(duration), checkpoints,
             evaluates ? fmt::format("; the validations every {} steps are not", run.train.eval_every) : "");
  const double limit = duration * kTimeMargin + static_cast<double>(config.job.signal_grace + kSlurmCheckSeconds);
  const auto limit_seconds = static_cast<int64_t>(std::ceil(limit / 60.0)) * 60;
  fmt::print("  suggested job.time: \"{}\" (the duration x {}, plus signal_grace and SLURM's {} s check)\n",
             slurm_time(limit_seconds), kTimeMargin, kSlurmCheckSeconds);
  const double interval = std::max(measured.checkpoint_seconds / kCheckpointTimeShare, kMinCheckpointIntervalSeconds);
  const auto every_steps = static_cast<int64_t>(std::ceil(interval / step));
  if (every_steps >= run.train.steps)
    fmt::print("  suggested checkpoint.every_steps: 0 (the whole run is shorter than one interval, {}: the saves "
               "on a signal and at the end suffice)\n",
               duration_text(interval));
  else
    fmt::print("  suggested checkpoint.every_steps: {} (a write every {}, {:.2f}% of the time)\n", every_steps,
               duration_text(static_cast<double>(every_steps) * step),
               100.0 * measured.checkpoint_seconds / (static_cast<double>(every_steps) * step));
}

// The ranks' save after a stop signal takes up to one step (the one under way) and one write,
// which signal_grace must cover before SLURM kills them. The suggestion doubles that for a
// slower node or filesystem than this one.
void warn_about_signal_grace(const JobSpec& job, const Measurement& measured) {
  const double needed = measured.step_time() + measured.checkpoint_seconds;
  if (static_cast<double>(job.signal_grace) >= needed) return;
  fmt::print(stderr,
             "warning: job.signal_grace = {} s is shorter than one step plus one checkpoint write ({:.3f} s + {:.3f} s "
             "measured here): a signalled run can be killed before its checkpoint is written; raise it to at least "
             "{} s\n",
             job.signal_grace, measured.step_time(), measured.checkpoint_seconds,
             static_cast<int64_t>(std::ceil(2.0 * needed)));
}

}  // namespace

void add_estimate_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "estimate", "parameters, memory per rank by component and FLOPs per step of a config");
  // The overview lists each command's description on one line; the rest is for its own --help.
  command->footer(
      "--measure N also times N steps here for the run's duration, a job.time and a checkpoint interval. Warns "
      "when job.mem is below the estimate and, with --measure only, when signal_grace is shorter than a measured "
      "step plus checkpoint write.");
  struct Options {
    std::string config;
    int64_t measure = 0;
  };
  auto options = std::make_shared<Options>();
  command->add_option("config", options->config, "TOML config")->type_name(path_kind::kConfig)->required();
  command->add_option("--measure", options->measure,
                      "train N steps on one rank here (a temporary run directory, one checkpoint at the end)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  const auto no_preflight = add_no_preflight_flag(*command);
  command->callback([options, no_preflight] {
    const Config config = load_config(options->config);
    if (config.program)
      throw UsageError(fmt::format("{} runs your own program ([program]): trainctl cannot see its model, so it cannot "
                                   "estimate its memory or FLOPs; `trainctl run {}` shows what it uses",
                                   options->config, options->config));
    if (config.sweep)
      throw UsageError(fmt::format("{} has a [sweep]: estimate one task's config, with its values written in",
                                   options->config));
    const MemoryEstimate estimate = estimate_memory(config, !*no_preflight);
    print_estimate(config, estimate);
    print_zero_modes(config, estimate);
    warn_about_memory(config, estimate);
    if (options->measure == 0) return;
    const Measurement measured = measure(config, options->measure);
    print_measurement(config, estimate, measured);
    warn_about_signal_grace(config.job, measured);
  });
}

}  // namespace trainctl

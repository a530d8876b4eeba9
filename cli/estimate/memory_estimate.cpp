// The memory a config's run needs: see memory_estimate.h.
#include "estimate/memory_estimate.h"

#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "bad_input.h"
#include "count_text.h"
#include "registry.h"
#include "runs/local_runtime.h"
#include "training_memory.h"
#include "sweeps/sweep.h"

namespace trainctl {

namespace {

constexpr auto kFloat = static_cast<int64_t>(sizeof(float));

// What a runtime holds beyond its start-up (runtime_startup_resident_bytes) besides the model and
// data: HDF5's state, the metrics, the training loop's own. A 4-4-2 MLP on 256 samples for 2 steps
// and one checkpoint peaked at 29.4 to 29.8 MiB (getrusage(RUSAGE_CHILDREN) around `trainctl run`)
// where that runtime's start-up held 23.1 MiB: Debian 12, x86-64, a build without CUDA (Open MPI
// 4.1.4, OpenBLAS 0.3.21, HDF5 1.10.8).
constexpr int64_t kRuntimeStateBytes = 7 * kMiB;

// What the data of a run holds in memory on every rank: the train and val files as loaded or
// mapped, the sampler's order (an int32 per training example) and one host batch.
struct DataMemory {
  int64_t bytes = 0;
  int64_t mapped_bytes = 0;  // files mapped, shared by the ranks of a node
};

// One rank's memory, component by component. Checkpoints are staged in host copies
// (runtime/checkpoint_manager.cpp): of the weights and the whole optimizer state on rank 0, or
// with checkpoint.sharded of each rank's shard of both on every rank.
std::vector<MemoryComponent> memory_components(const RunSpec& run, const JobSpec& job, const ModelFootprint& model,
                                               const DataMemory& data, int64_t process_base) {
  const int64_t world = job.world_size();
  const TrainingMemory rank = training_memory(run.train, model, world);
  std::string optimizer = run.train.optimizer == OptimizerKind::kAdamW ? "adamw: 2 moments" : "sgd: momentum";
  // ZeRO-1 and sharded checkpoints split the flat state over the data-parallel ranks.
  if (run.train.zero == 1)
    optimizer += fmt::format("; ZeRO-1: 1/{} of {}", world, size_text(rank.optimizer_buffers * rank.weights));
  const bool gpu = run.train.device != "cpu";
  const MemoryComponent staging =
      run.checkpoint.sharded
          ? MemoryComponent{"checkpoint staging (a shard, every rank)", (1 + rank.optimizer_buffers) * rank.shard}
          : MemoryComponent{"checkpoint staging (rank 0)", rank.weights + rank.optimizer_state, false, true};
  std::vector<MemoryComponent> components{
      {"weights", rank.weights, gpu},
      {"gradients", rank.gradients, gpu},
      {fmt::format("optimizer state ({})", optimizer), rank.optimizer_state, gpu},
  };
  // precision = "bf16": the GEMMs' copy of the weights.
  if (rank.compute_copy > 0) components.push_back({"weights' bf16 compute copy", rank.compute_copy, gpu});
  components.insert(components.end(),
                    {
                        {fmt::format("activations ({})", element_type_name(model.activation_type)),
                         rank.activations, gpu},
                        {"CPU kernel scratch", gpu ? 0 : model.cpu_scratch_bytes},
                        {"data", data.bytes},
                        {"data, mapped (once a node)", data.mapped_bytes, false, false, true},
                        staging,
                        {"process base", process_base},
                    });
  return components;
}

// Estimates the runs of one config: the runtime's start-up memory is asked for once, and each
// data file's footprint read once per [model], since a sweep's tasks share most of theirs.
class MemoryEstimator {
 public:
  explicit MemoryEstimator(bool read_files) : read_files_(read_files) {}

  MemoryEstimate estimate(const toml::table& config, const std::string& path) {
    toml::table resolved = config;
    resolve_data_paths(resolved, std::filesystem::absolute(path).parent_path().string());
    const RunSpec run = parse_run_spec(resolved, path);
    const JobSpec job = parse_job_spec(resolved, path);
    const ModelKind& kind = model_kind(run.model);
    const ModelOptions options{run.train.micro_batch, run.train.precision, run.train.recompute, Stream{}};
    ModelOptions flipped = options;
    flipped.recompute = !options.recompute;

    MemoryEstimate estimate;
    estimate.model = kind.footprint(run.model, options);
    estimate.data_read = read_files_;
    const DataMemory data = data_memory(resolved, run, estimate.model);
    estimate.memory = memory_components(run, job, estimate.model, data, process_base());
    const ModelFootprint other = kind.footprint(run.model, flipped);
    if (other.activation_bytes != estimate.model.activation_bytes)
      estimate.other_recompute = memory_components(run, job, other, data, process_base());
    return estimate;
  }

 private:
  DataMemory data_memory(const toml::table& config, const RunSpec& run, const ModelFootprint& model) {
    DataMemory memory{model.host_batch_bytes, 0};
    if (!read_files_) return memory;
    const auto add = [&](const char* key, const std::string& file, bool sampled) {
      const DataFootprint data = data_footprint(config, run, key, file);
      (data.mapped ? memory.mapped_bytes : memory.bytes) += data.bytes;
      memory.bytes += sampled ? data.examples * static_cast<int64_t>(sizeof(int32_t)) : 0;
    };
    add("train", run.data.train, true);
    if (run.data.val) add("val", *run.data.val, false);
    return memory;
  }

  DataFootprint data_footprint(const toml::table& config, const RunSpec& run, const char* key,
                               const std::string& file) {
    std::ostringstream model_and_file;
    if (const toml::table* model = config["model"].as_table()) model_and_file << *model;
    model_and_file << "\n" << file;
    const auto known = data_files_.find(model_and_file.str());
    if (known != data_files_.end()) return known->second;
    try {
      const DataFootprint footprint = model_kind(run.model).data_footprint(file, run.model);
      data_files_.emplace(model_and_file.str(), footprint);
      return footprint;
    } catch (const DataError& error) {
      throw BadInput(fmt::format("data.{}: {}", key, error.what()));
    }
  }

  int64_t process_base() {
    if (!process_base_) process_base_ = runtime_startup_resident_bytes() + kRuntimeStateBytes;
    return *process_base_;
  }

  bool read_files_;
  std::optional<int64_t> process_base_;
  std::map<std::string, DataFootprint> data_files_;  // by the [model] table's text and the file
};

}  // namespace

MemoryEstimate estimate_memory(const Config& config, bool read_files) {
  return MemoryEstimator(read_files).estimate(config.table, config.path);
}

// The sums saturate at INT64_MAX, as memory_bytes does: a config can describe more memory than an
// int64 counts (thousands of ranks of a model of petabytes), which must still read as too much.
int64_t total_bytes(const std::vector<MemoryComponent>& components, bool (*counts)(const MemoryComponent&)) {
  int64_t total = 0;
  for (const MemoryComponent& component : components)
    if (counts(component) && __builtin_add_overflow(total, component.bytes, &total))
      return std::numeric_limits<int64_t>::max();
  return total;
}

int64_t node_host_bytes(const JobSpec& job, const std::vector<MemoryComponent>& memory) {
  const int64_t rank_zero = total_bytes(memory, [](const MemoryComponent& c) { return !c.device; });
  const int64_t other_rank = total_bytes(
      memory, [](const MemoryComponent& c) { return !c.device && !c.rank_zero_only && !c.once_per_node; });
  int64_t node = 0;
  if (__builtin_mul_overflow(job.ranks_per_node - 1, other_rank, &node) ||
      __builtin_add_overflow(node, rank_zero, &node))
    return std::numeric_limits<int64_t>::max();
  return node;
}

// job.mem is SLURM's --mem, a limit on all of a job's processes on a node together, so the ranks
// of a node are held against it as a sum rather than each against job.mem / ranks_per_node: rank
// 0's checkpoint staging is on one rank only, and mapped data are in the page cache once a node,
// which charges them once. What sits in a GPU's memory is not the node's, and not counted.
std::optional<ConfigError> job_mem_refusal(const toml::table& config, const std::string& file, const JobSpec& job,
                                           const MemoryEstimate& estimate) {
  if (!job.mem) return std::nullopt;
  const int64_t limit = memory_bytes(*job.mem);
  const int64_t needed = node_host_bytes(job, estimate.memory);
  if (needed <= limit) return std::nullopt;
  return ConfigError(TableReader::child(config, "job", file).position("mem"), "job.mem",
                     fmt::format("{} ({}) per node cannot hold this run, estimated at {} of host memory for the {} "
                                 "rank(s) of a node (the model: {} parameters, {} in fp32); raise job.mem (`trainctl "
                                 "estimate {}` lists the memory by component)",
                                 *job.mem, size_text(limit), size_text(needed), job.ranks_per_node,
                                 estimate.model.parameters, size_text(estimate.model.parameters * kFloat), file));
}

void check_memory_fits(const Config& config, bool read_files) {
  if (config.program) return;
  MemoryEstimator estimator(read_files);
  const ConfigCheck check = [&](const toml::table& table) {
    const JobSpec job = parse_job_spec(table, config.path);
    if (!job.mem) return;
    const MemoryEstimate estimate = estimator.estimate(table, config.path);
    if (std::optional<ConfigError> refusal = job_mem_refusal(table, config.path, job, estimate)) throw *refusal;
  };
  if (!config.sweep) return check(config.table);
  for_each_task_config(config.table, *config.sweep, expand_sweep(*config.sweep), check,
                       [](const SweepTask&, toml::table&) {});
}

}  // namespace trainctl

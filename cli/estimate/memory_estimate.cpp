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
  // What ZeRO keeps a 1/world shard of: the optimizer state from 1 on, the gradients from 2, the
  // weights at 3.
  const auto shard_of = [&](const char* what, int64_t from_zero) {
    if (run.train.zero < from_zero) return std::string(what);
    return fmt::format("{} (ZeRO-{}: 1/{} of {})", what, run.train.zero, world, size_text(model.parameters * kFloat));
  };
  std::string optimizer = run.train.optimizer == OptimizerKind::kAdamW ? "adamw: 2 moments" : "sgd: momentum";
  if (run.train.zero > 0)
    optimizer += fmt::format("; ZeRO-{}: 1/{} of {}", run.train.zero, world,
                             size_text(rank.optimizer_buffers * model.parameters * kFloat));
  const bool gpu = run.train.device != "cpu";
  const MemoryComponent staging =
      run.checkpoint.sharded
          ? MemoryComponent{"checkpoint staging (a shard, every rank)", (1 + rank.optimizer_buffers) * rank.shard}
          : MemoryComponent{"checkpoint staging (rank 0)", rank.weights + rank.optimizer_state, false, true};
  std::vector<MemoryComponent> components{
      {shard_of("weights", 3), rank.weights, gpu},
      {shard_of("gradients", 2), rank.gradients, gpu},
      {fmt::format("optimizer state ({})", optimizer), rank.optimizer_state, gpu},
  };
  // precision = "bf16": the GEMMs' copy of the weights.
  if (rank.compute_copy > 0) components.push_back({"weights' bf16 compute copy", rank.compute_copy, gpu});
  // ZeRO-2 and 3: the layers in turn (the largest's size each) and the kept layer.
  const auto layers = [&](int64_t turns) {
    return fmt::format("{} x {}{}", turns, size_text(model.largest_layer * kFloat),
                       model.kept_layer > 0 ? fmt::format(" + kept {}", size_text(model.kept_layer * kFloat)) : "");
  };
  if (rank.gathered_layers > 0)
    components.push_back({fmt::format("gathered layers ({}{})", layers(rank.layers_in_turn),
                                      model.compute_copy_bytes > 0 ? ", fp32 and bf16" : ""),
                          rank.gathered_layers, gpu});
  if (rank.layer_gradients > 0)
    components.push_back({fmt::format("layers' gradients ({})", layers(std::min<int64_t>(2, model.layers))),
                          rank.layer_gradients, gpu});
  components.insert(components.end(),
                    {
                        {fmt::format("activations ({})", element_type_name(model.activation_type)),
                         rank.activations, gpu},
                        {"GEMM workspace (cuBLASLt)", rank.gemm_workspace, gpu},
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
    for (int64_t zero = 0; zero < 4; ++zero) {
      TrainSpec train = run.train;
      train.zero = zero;
      estimate.by_zero[static_cast<size_t>(zero)] = training_memory(train, estimate.model, job.world_size());
    }
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

// A GPU's memory holds a rank's model state and activations; the rest is the host's.
std::optional<ConfigError> gpu_memory_refusal(const toml::table& config, const std::string& file, const JobSpec& job,
                                              const RunSpec& run, const MemoryEstimate& estimate) {
  if (!job.gpu_memory || run.train.device == "cpu") return std::nullopt;
  const int64_t limit = memory_bytes(*job.gpu_memory);
  const auto needed = [&](int64_t zero) { return estimate.by_zero[static_cast<size_t>(zero)].device_bytes(); };
  if (needed(run.train.zero) <= limit) return std::nullopt;
  const std::string over = fmt::format(
      "a rank needs {} of device memory with train.zero = {} on {} ranks, more than job.gpu_memory = {} ({}) holds",
      size_text(needed(run.train.zero)), run.train.zero, job.world_size(), *job.gpu_memory, size_text(limit));
  for (int64_t zero = run.train.zero + 1; zero < 4; ++zero)
    if (needed(zero) <= limit)
      return ConfigError(TableReader::child(config, "train", file).position("zero"), "train.zero",
                         fmt::format("{}; with train.zero = {} it needs {} (`trainctl estimate {}` compares them)",
                                     over, zero, size_text(needed(zero)), file));
  return ConfigError(TableReader::child(config, "job", file).position("gpu_memory"), "job.gpu_memory",
                     fmt::format("{}, and no train.zero fits ({} with zero = 3): more ranks, a smaller "
                                 "train.micro_batch or train.recompute = true may (`trainctl estimate {}`)",
                                 over, size_text(needed(3)), file));
}

void check_memory_fits(const Config& config, bool read_files) {
  if (config.program) return;
  MemoryEstimator estimator(read_files);
  const ConfigCheck check = [&](const toml::table& table) {
    const JobSpec job = parse_job_spec(table, config.path);
    if (!job.mem && !job.gpu_memory) return;
    const MemoryEstimate estimate = estimator.estimate(table, config.path);
    if (std::optional<ConfigError> refusal = job_mem_refusal(table, config.path, job, estimate)) throw *refusal;
    const RunSpec run = parse_run_spec(table, config.path);
    if (std::optional<ConfigError> refusal = gpu_memory_refusal(table, config.path, job, run, estimate)) throw *refusal;
  };
  if (!config.sweep) return check(config.table);
  for_each_task_config(config.table, *config.sweep, expand_sweep(*config.sweep), check,
                       [](const SweepTask&, toml::table&) {});
}

}  // namespace trainctl

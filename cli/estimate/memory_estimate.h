// The memory a config's run needs, worked out from the config and the data files' headers without
// building anything: each rank's by component, the host memory of a node, which job.mem limits,
// and a rank's device memory under each train.zero, which job.gpu_memory limits. `trainctl
// estimate` shows it; validate, render and submit refuse a config whose job.mem or
// job.gpu_memory is below it, so that a run that cannot fit is stopped before it waits in a queue.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config_file.h"
#include "config_reader.h"
#include "registry.h"
#include "training_memory.h"

namespace trainctl {

// A mebibyte: the unit of the memory table.
inline constexpr int64_t kMiB = int64_t{1} << 20;

struct MemoryComponent {
  std::string name;
  int64_t bytes = 0;
  bool device = false;          // in the memory of train.device (not the host's) when that is a GPU
  bool rank_zero_only = false;  // checkpoint staging
  bool once_per_node = false;   // mapped files: in every rank's resident set, but one copy per node
};

// The estimate of a run as configured and, when the model has it, with train.recompute the other
// way round.
struct MemoryEstimate {
  ModelFootprint model;
  std::vector<MemoryComponent> memory;  // one rank's
  std::optional<std::vector<MemoryComponent>> other_recompute;  // the same run with recompute flipped
  bool data_read = true;  // false: the data files were not opened, only one batch is counted
  // A rank's model state and activations with train.zero = 0, 1, 2 and 3, the rest as configured.
  std::array<TrainingMemory, 4> by_zero{};
};

// The estimate of `config`, a training run (not a [program], not a [sweep]); with `read_files`,
// the data files' headers are read (BadInput "data.train: ..." for a file that does not fit).
MemoryEstimate estimate_memory(const Config& config, bool read_files);

// The bytes of the components that `counts` accepts (all of them by default).
int64_t total_bytes(const std::vector<MemoryComponent>& components,
                    bool (*counts)(const MemoryComponent&) = [](const MemoryComponent&) { return true; });

// The host memory a node needs, which job.mem limits: rank 0's and the other ranks' (without
// checkpoint staging and the mapped files, which rank 0's count once).
int64_t node_host_bytes(const JobSpec& job, const std::vector<MemoryComponent>& memory);

// The ConfigError at job.mem (in `file`, whose [job] is `job`) when it is set and below
// node_host_bytes of `estimate`, naming the model's size; nullopt when the run fits.
std::optional<ConfigError> job_mem_refusal(const toml::table& config, const std::string& file, const JobSpec& job,
                                           const MemoryEstimate& estimate);

// With train.device a GPU, the ConfigError when job.gpu_memory is set and a rank's device memory
// (estimate.by_zero's as configured) is more: at train.zero, naming the smallest zero that fits,
// or at job.gpu_memory when none does. nullopt when it fits.
std::optional<ConfigError> gpu_memory_refusal(const toml::table& config, const std::string& file, const JobSpec& job,
                                              const RunSpec& run, const MemoryEstimate& estimate);

// Throws job_mem_refusal's or gpu_memory_refusal's error for `config`, or for a [sweep] the first
// task's that has one (reported at [sweep], naming the task). Nothing for a [program], whose model
// trainctl cannot see, or without job.mem and job.gpu_memory. `read_files` as for estimate_memory.
void check_memory_fits(const Config& config, bool read_files);

}  // namespace trainctl

// The job-spec schema: the [job] table of a config, i.e. what SLURM is asked for, checked so
// that every value that reaches an #SBATCH line is safe there (see render.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace trainctl {

// Upper bounds of the counts, far beyond any cluster, so that products of them cannot overflow.
constexpr int64_t kMaxNodes = 100000;
constexpr int64_t kMaxRanksPerNode = 4096;
constexpr int64_t kMaxCpusPerRank = 4096;
constexpr int64_t kMaxGpusPerNode = 1024;
constexpr int64_t kMaxRequeues = 1000;
constexpr int64_t kMaxExcludedNodes = 1000;

struct JobSpec {
  std::string name;                     // [A-Za-z0-9._-]+, also names the default run dir
  std::optional<std::string> partition;
  std::optional<std::string> account;
  std::optional<std::string> qos;
  int64_t nodes = 1;
  int64_t ranks_per_node = 1;
  int64_t cpus_per_rank = 1;
  int64_t gpus_per_node = 0;
  std::optional<std::string> mem;       // per node, SLURM syntax: 4000, 4000M, 16G
  // The memory of one of the job's GPUs, as job.mem is written ("80G"): what validate, render and
  // submit hold a rank's device memory to (cli/estimate/memory_estimate.h). SLURM is not told.
  std::optional<std::string> gpu_memory;
  std::optional<std::string> time;      // SLURM syntax: "30", "1:00:00", "2-00:00:00"
  std::string signal = "TERM";          // TERM, USR1 or USR2
  int64_t signal_grace = 120;           // seconds before the end that the signal arrives
  int64_t max_requeues = 10;
  // Seconds without a finished step (start-up, evaluation and saving included) before the batch
  // script kills the ranks as hung and requeues; 0 turns the watchdog off (the default for a
  // config with [program]).
  int64_t hang_timeout = 1800;
  // Before step 0 of every start, each rank checks its device and the ranks one all-reduce and
  // one all-gather, the collectives bounded by check_nodes_timeout seconds (docs/reliability.md).
  bool check_nodes = true;
  int64_t check_nodes_timeout = 300;
  // Nodes blamed for a failure are excluded from the requeued job, up to this many; one more
  // fails the job instead of letting it queue for ever.
  int64_t max_excluded_nodes = 2;
  std::optional<std::string> constraint;
  std::optional<std::string> exclude;
  std::map<std::string, std::string> env;  // exported into the batch script, values quoted
  std::vector<std::string> setup;          // shell lines the user wrote, run verbatim

  int64_t world_size() const { return nodes * ranks_per_node; }  // at most 4.1e8
};

// Reads [job] of `root`; throws ConfigError (file:line:col, key, message).
JobSpec parse_job_spec(const toml::table& root, const std::string& file);

// The bytes of a job.mem or job.gpu_memory value (as parse_job_spec accepts it): SLURM's units K, M (the default),
// G and T are powers of 1024. Saturates at INT64_MAX.
int64_t memory_bytes(std::string_view mem);

// A time limit of `seconds` as SLURM writes one: "H:MM:SS", or "D-HH:MM:SS" from a day up.
std::string slurm_time(int64_t seconds);

// The seconds of a SLURM time limit "M", "M:S", "H:M:S", "D-H", "D-H:M" or "D-H:M:S" (job.time),
// capped a second above the longest limit job.time takes, so that no number of digits can
// overflow; nullopt for any other form.
std::optional<int64_t> time_limit_seconds(std::string_view time);

}  // namespace trainctl

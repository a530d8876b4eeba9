// Where one rank of a [program] job runs, and the environment its program gets: the variables
// of torch.distributed's env:// rendezvous and trainctl's own (docs/programs.md, the contract).
// Under srun they come from SLURM's task variables; `trainctl run` fills in its own.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "run_layout.h"

namespace trainctl {

struct RankPlace {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  std::string master_addr;
  int master_port = 0;
  int64_t restart = 0;  // 0 on the first run, then the requeue count
};

// The variable the batch script exports with the address of the allocation's first node.
inline constexpr const char* kMasterAddrVariable = "TRAINCTL_MASTER_ADDR";

using EnvironmentLookup = std::function<const char*(const char*)>;

// From SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID with SLURM_STEP_TASKS_PER_NODE,
// SLURM_JOB_ID, SLURM_RESTART_COUNT and TRAINCTL_MASTER_ADDR. Throws BadInput naming the first
// variable that is missing or malformed.
RankPlace rank_place_under_slurm(const EnvironmentLookup& environment);

// A job's rendezvous port: 10000 + job id mod 20000. Jobs sharing a node get different ports
// (unless their ids are 20000 apart), and the range lies below Linux's ephemeral ports
// (32768-60999), so no outgoing connection holds it.
int master_port_of_job(int64_t job_id);

// The tasks on node `node` (0-based) of SLURM's compressed count list, "2(x3),1" for 2, 2, 2, 1.
// Throws BadInput for a malformed list or a node beyond it.
int64_t tasks_on_node(std::string_view tasks_per_node, int64_t node);

// The variables a rank's program gets on top of those it inherits, in the contract's order.
std::vector<std::pair<std::string, std::string>> rank_environment(const RankPlace& place, const RunLayout& run);

}  // namespace trainctl

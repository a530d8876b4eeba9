// The environment of a [program]'s rank: see rank_environment.h.
#include "rank_environment.h"

#include <optional>

#include <fmt/format.h>

#include "bad_input.h"
#include "count_text.h"
#include "exit_codes.h"

namespace trainctl {

namespace {

std::string required(const EnvironmentLookup& environment, const char* name) {
  const char* value = environment(name);
  if (value == nullptr || *value == '\0')
    throw BadInput(fmt::format("{} is not set: trainctl-launch runs as a task of srun, started by the batch script",
                               name));
  return value;
}

int64_t required_count(const EnvironmentLookup& environment, const char* name) {
  const std::string text = required(environment, name);
  const std::optional<int64_t> value = parse_count(text);
  if (!value) throw BadInput(fmt::format("{}=\"{}\" is not a count", name, text));
  return *value;
}

}  // namespace

RankPlace rank_place_under_slurm(const EnvironmentLookup& environment) {
  RankPlace place;
  place.rank = required_count(environment, "SLURM_PROCID");
  place.world_size = required_count(environment, "SLURM_NTASKS");
  place.local_rank = required_count(environment, "SLURM_LOCALID");
  const char* step_tasks = environment("SLURM_STEP_TASKS_PER_NODE");
  place.local_world_size = tasks_on_node(step_tasks != nullptr ? step_tasks : required(environment, "SLURM_TASKS_PER_NODE"),
                                         required_count(environment, "SLURM_NODEID"));
  place.master_addr = required(environment, kMasterAddrVariable);
  place.master_port = master_port_of_job(required_count(environment, "SLURM_JOB_ID"));
  const char* restarts = environment("SLURM_RESTART_COUNT");  // absent until the first requeue
  place.restart = restarts != nullptr ? required_count(environment, "SLURM_RESTART_COUNT") : 0;
  return place;
}

int master_port_of_job(int64_t job_id) { return static_cast<int>(10000 + job_id % 20000); }

int64_t tasks_on_node(std::string_view tasks_per_node, int64_t node) {
  const auto malformed = [&] {
    return BadInput(fmt::format("SLURM's tasks per node \"{}\" is not a list such as 2(x3),1", tasks_per_node));
  };
  int64_t first_node_of_group = 0;
  for (std::string_view rest = tasks_per_node; !rest.empty();) {
    const size_t comma = rest.find(',');
    std::string_view group = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::optional<int64_t> repeats = 1;
    if (const size_t open = group.find("(x"); open != std::string_view::npos) {
      if (!group.ends_with(')')) throw malformed();
      repeats = parse_count(group.substr(open + 2, group.size() - open - 3));
      group = group.substr(0, open);
    }
    const std::optional<int64_t> tasks = parse_count(group);
    if (!tasks || !repeats) throw malformed();
    if (node < first_node_of_group + *repeats) return *tasks;
    first_node_of_group += *repeats;
  }
  throw BadInput(fmt::format("node {} is beyond SLURM's tasks per node \"{}\"", node, tasks_per_node));
}

std::vector<std::pair<std::string, std::string>> rank_environment(const RankPlace& place, const RunLayout& run) {
  return {
      {"RANK", std::to_string(place.rank)},
      {"WORLD_SIZE", std::to_string(place.world_size)},
      {"LOCAL_RANK", std::to_string(place.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(place.local_world_size)},
      {"MASTER_ADDR", place.master_addr},
      {"MASTER_PORT", std::to_string(place.master_port)},
      {"TRAINCTL_RUN_DIR", run.path()},
      {"TRAINCTL_CHECKPOINT_DIR", run.checkpoints()},
      {"TRAINCTL_RESTART", std::to_string(place.restart)},
      {"TRAINCTL_PARAMS", run.params()},
      {"TRAINCTL_EXIT_REQUEUE", std::to_string(exit_code::kSavedRequeue)},
  };
}

}  // namespace trainctl

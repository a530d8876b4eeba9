// trainctl-launch's node check, before it starts a [program] (docs/programs.md), when the batch
// script asks for one (TRAINCTL_NODE_CHECK_TIMEOUT): the device check of the rank's device
// (kernels/device_check.h), with no collective, since the program brings its own. The device is the
// GPU that local rank L takes (visible GPU L) where SLURM gave the job GPUs, else the CPU. The
// check runs in a child process of its own, so that no GPU memory stays held by trainctl-launch
// while the program runs, and so that a device that hangs is given up on after the timeout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rank_environment.h"

namespace trainctl {

// Why this rank's node failed ("rank 0 (cuda device 0): GEMM differs from the CPU's (...)"), for
// bad.nodes and stderr; nullopt when it passed. `node` is this_node_name(): the test hook
// TRAINCTL_TEST_FAIL_NODE_CHECK names nodes by it.
std::optional<std::string> check_program_node(const RankPlace& place, const std::string& node, int64_t timeout_seconds);

}  // namespace trainctl

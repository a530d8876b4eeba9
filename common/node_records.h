// What the ranks tell the batch script about the nodes they run on, for the node check before
// step 0 (docs/runtime.md, "The node check"): the variable that turns the check on, each rank's
// node (rank.nodes/R), the nodes a failed check blames (bad.nodes), and the test hook that fails
// one node's check. Shared by the runtime and trainctl-launch, which both check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "run_layout.h"

namespace trainctl {

// TRAINCTL_NODE_CHECK_TIMEOUT: the seconds the check may take, from the batch script; nullopt when
// it is unset or 0 (no check: [job] check_nodes = false, or `trainctl run`). Throws BadInput for a
// value that is not a count.
std::optional<int64_t> node_check_timeout_seconds();

// Writes rank.nodes/<rank>: `node`, one line. Each rank writes its own file, atomically, as it
// starts.
void record_rank_node(const RunLayout& run, int64_t rank, const std::string& node);

// Appends "NODE<TAB>REASON" to bad.nodes with one write(2) of a file opened O_APPEND, so that the
// lines of ranks on several nodes never interleave. Tabs and line breaks in `reason` become
// spaces. Throws std::system_error where the line cannot be written.
void blame_node(const RunLayout& run, std::string_view node, std::string_view reason);

// Test hook: TRAINCTL_TEST_FAIL_NODE_CHECK="n1[,n2...]" lists `node`, whose device check's GEMM
// then comes out wrong (DeviceCheck::perturb_gemm).
bool test_fails_node_check(std::string_view node);

}  // namespace trainctl

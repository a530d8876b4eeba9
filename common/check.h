// One failure reporter for every checked library call (MPI_CHECK, H5_CHECK, and the CUDA/NCCL
// checks of kernels/cuda): it names the statement, file:line, host and rank, then throws
// CheckFailure so the caller decides between reporting (CLI) and aborting the job (runtime).
#pragma once

#include <stdexcept>
#include <string>

namespace trainctl {

class CheckFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// This machine's host name, as reports name it (gethostname, at most 255 bytes).
std::string this_host_name();
// This node's name as SLURM knows it (SLURMD_NODENAME) where SLURM started the process, else the
// host name: two SLURM nodes may share a host (the local test cluster's all share "vm"), so what
// blames a node (bad.nodes) or places a rank (rank.nodes) uses this. At most 255 bytes.
std::string this_node_name();

// The rank named in reports; -1 (the default, e.g. in the CLI) leaves the rank out.
void set_reporting_rank(int rank);

[[noreturn]] void report_check_failure(const char* statement, const char* file, int line, const std::string& detail);

}  // namespace trainctl

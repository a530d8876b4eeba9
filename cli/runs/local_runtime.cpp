// trainctl-runtime on this machine: see local_runtime.h.
#include "runs/local_runtime.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "child_process.h"
#include "commands.h"
#include "count_text.h"
#include "errors.h"

namespace trainctl {

namespace {

// trainctl-runtime for `run_dir`, under mpirun for more than one rank.
std::vector<std::string> runtime_command(const RunDir& run_dir, int ranks) {
  std::vector<std::string> argv;
  if (ranks > 1) {
    argv = {"mpirun", "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none"};
    if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  }
  argv.insert(argv.end(), {runtime_executable(), "--run-dir", run_dir.path()});
  return argv;
}

}  // namespace

void export_thread_counts(const JobSpec& job) {
  const std::string threads = std::to_string(job.cpus_per_rank);
  setenv("OMP_NUM_THREADS", threads.c_str(), 0);
  setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 0);
}

ProcessEnd run_runtime_locally(const RunDir& run_dir, int ranks, const std::string& output) {
  // A rank waiting for its peers busy-polls by default, and mpirun yields only when it sees more
  // ranks than cores. A local run shares its machine with whatever else runs there (an editor, a
  // build, another run), which mpirun cannot see. Yielding costs one system call per poll; on
  // this project's 2-core machine, zero_sharding and sharded_resume ran 20-35% faster with it.
  if (ranks > 1) setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  return start({.argv = runtime_command(run_dir, ranks), .output_file = output}).wait();
}

int64_t runtime_startup_resident_bytes() {
  const CapturedRun run = run_capturing({runtime_executable(), "--startup-memory"});
  const std::optional<int64_t> bytes = parse_count(run.out.substr(0, run.out.find('\n')));
  if (run.end != ProcessEnd::exited(0) || !bytes)
    throw Failure(fmt::format("{} did not tell its start-up memory: {}", runtime_executable(), run.out + run.err));
  return *bytes;
}

}  // namespace trainctl

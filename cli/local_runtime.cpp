// trainctl-runtime on this machine: see local_runtime.h.
#include "local_runtime.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "count_text.h"
#include "errors.h"
#include "program_rank.h"

namespace trainctl {

namespace {

int run_and_wait(const std::vector<std::string>& argv, const std::string& output) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t child = fork();
  if (child < 0) throw Failure(fmt::format("cannot fork: {}", std::strerror(errno)));
  if (child == 0) {
    if (!output.empty()) {
      const int file = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (file < 0 || dup2(file, STDOUT_FILENO) < 0 || dup2(file, STDERR_FILENO) < 0) {
        fmt::print(stderr, "trainctl: cannot write {}: {}\n", output, std::strerror(errno));
        _exit(127);
      }
    }
    execvp(args[0], args.data());
    fmt::print(stderr, "trainctl: cannot run {}: {}\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return exit_code_of(status);
}

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

int run_runtime_locally(const RunDir& run_dir, int ranks, const std::string& output) {
  // A rank waiting for its peers busy-polls by default, and mpirun yields only when it sees more
  // ranks than cores. A local run shares its machine with whatever else runs there (an editor, a
  // build, another run), which mpirun cannot see. Yielding costs one system call per poll; on
  // this project's 2-core machine, zero_sharding and sharded_resume ran 20-35% faster with it.
  if (ranks > 1) setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  return run_and_wait(runtime_command(run_dir, ranks), output);
}

int64_t runtime_startup_resident_bytes() {
  const std::string command = shell_quote(runtime_executable()) + " --startup-memory 2>&1";
  std::FILE* runtime = popen(command.c_str(), "r");
  if (runtime == nullptr) throw Failure(fmt::format("cannot run {}: {}", command, std::strerror(errno)));
  std::string output;
  for (int c = std::fgetc(runtime); c != EOF; c = std::fgetc(runtime)) output += static_cast<char>(c);
  const int status = pclose(runtime);
  const std::optional<int64_t> bytes = parse_count(output.substr(0, output.find('\n')));
  if (status != 0 || !bytes)
    throw Failure(fmt::format("{} did not tell its start-up memory: {}", runtime_executable(), output));
  return *bytes;
}

}  // namespace trainctl

// trainctl-launch's node check: see program_node_check.h.
#include "program_node_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "child_process.h"
#include "device.h"
#include "device_check.h"
#include "node_records.h"
#include "program_hang_report.h"
#include "program_rank.h"

namespace trainctl {

namespace {

// SLURM sets these for a step with GPUs (docs/programs.md, "GPUs"); CUDA_VISIBLE_DEVICES alone may
// be the submitting shell's, which sbatch passes on.
bool job_has_gpus() {
  for (const char* variable : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"})
    if (const char* gpus = std::getenv(variable); gpus != nullptr && *gpus != '\0') return true;
  return false;
}

// In the child: the device bound and checked; why it failed, or nullopt.
std::optional<std::string> check_bound_device(const char* device_name, const RankPlace& place, bool perturb) {
  try {
    const Device& device = *find_device(device_name);
    device.info.bind_local(static_cast<int>(place.local_rank), static_cast<int>(place.local_world_size));
    std::optional<std::string> failure = check_device(device, {.needed_bytes = std::nullopt, .perturb_gemm = perturb});
    device.info.unbind();
    return failure;
  } catch (const DeviceUnavailable& error) {
    return fmt::format("not usable: {}", error.what());
  } catch (const std::exception& error) {
    return fmt::format("the device check failed: {}", error.what());
  }
}

}  // namespace

std::optional<std::string> check_program_node(const RankPlace& place, const std::string& node,
                                              int64_t timeout_seconds) {
  const char* device_name = job_has_gpus() ? "cuda" : "cpu";
  const std::string failed_on =
      fmt::format("rank {} ({})", place.rank, device_label(device_name, static_cast<int>(place.local_rank)));
  // The child's reason comes back through a pipe, which it fills before it exits.
  int reason_pipe[2];
  if (pipe2(reason_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  const bool perturb = test_fails_node_check(node);
  const Child checking = start_function({.stdin_from_null = true}, [&] {
    // Only the parent answers them: a report from here would overwrite its own, and a stop signal
    // that ended this process would read as a failed device.
    signal(SIGQUIT, SIG_IGN);
    for (int stop : kStopSignals) signal(stop, SIG_IGN);
    close(reason_pipe[0]);
    const std::optional<std::string> failure = check_bound_device(device_name, place, perturb);
    if (failure) static_cast<void>(write(reason_pipe[1], failure->data(), failure->size()));
    return failure ? 1 : 0;
  });
  close(reason_pipe[1]);
  report_on_process(checking.pid(), "node-check");

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  std::optional<ProcessEnd> end;
  while (!(end = checking.poll()) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!end) {
    checking.signal(SIGKILL);
    checking.wait();
    close(reason_pipe[0]);
    return fmt::format("{}: the device check did not finish within {} s", failed_on, timeout_seconds);
  }
  std::string reason;
  char chunk[512];
  for (ssize_t got; (got = read(reason_pipe[0], chunk, sizeof(chunk))) > 0;)
    reason.append(chunk, static_cast<size_t>(got));
  close(reason_pipe[0]);
  if (*end == ProcessEnd::exited(0)) return std::nullopt;
  if (reason.empty()) reason = fmt::format("the device check {}", end->description());
  return fmt::format("{}: {}", failed_on, reason);
}

}  // namespace trainctl

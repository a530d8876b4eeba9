// What this rank is doing, and its hang report: see rank_activity.h.
#include "rank_activity.h"

#include <execinfo.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>

namespace trainctl {

namespace {

constexpr const char* kPhaseNames[] = {"startup", "node-check", "data",      "forward",
                                       "backward", "optimizer", "eval", "checkpoint"};
constexpr const char* kCollectiveNames[] = {"-",          "all-reduce", "all-gather", "reduce-scatter",
                                            "broadcast", "barrier",    "gather"};

// Relaxed: a report reads what the rank's own thread stored (the handler runs there), and the
// watchdog asks long after the last transition.
std::atomic<int64_t> current_step{-1};
std::atomic<Phase> current_phase{Phase::kStartup};
std::atomic<Collective> current_collective{Collective::kNone};
std::atomic<int64_t> collective_since_ns{0};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<Phase>::is_always_lock_free &&
              std::atomic<Collective>::is_always_lock_free);

// Where the handler writes, set once before `report_ready` is.
std::atomic<bool> report_ready{false};
HangReportPath report_path;
int64_t report_rank = 0;
char report_node[256] = {};
pid_t handler_thread = 0;

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

pid_t this_thread() { return static_cast<pid_t>(syscall(SYS_gettid)); }

extern "C" void write_hang_report(int) {
  const int saved_errno = errno;
  // A signal for the process lands on any thread that does not block it (MPI's, NCCL's, a
  // checkpoint writer's): the stack worth reporting is the one of the thread that trains.
  if (this_thread() != handler_thread) {
    syscall(SYS_tgkill, getpid(), handler_thread, SIGQUIT);
  } else if (report_ready.load(std::memory_order_acquire)) {
    SignalSafeText line;
    format_activity_line(line, report_rank, report_node, current_activity());
    const int fd = start_hang_report(report_path, line.view());
    if (fd >= 0) {
      write_all(fd, "stack:\n");
      void* frames[64];
      backtrace_symbols_fd(frames, backtrace(frames, 64), fd);
      close(fd);
    }
  }
  errno = saved_errno;
}

}  // namespace

const char* phase_name(Phase phase) { return kPhaseNames[static_cast<size_t>(phase)]; }

std::optional<Phase> phase_named(std::string_view name) {
  for (size_t i = 0; i < std::size(kPhaseNames); ++i)
    if (name == kPhaseNames[i]) return static_cast<Phase>(i);
  return std::nullopt;
}

const char* collective_name(Collective collective) { return kCollectiveNames[static_cast<size_t>(collective)]; }

void note_step(int64_t step) { current_step.store(step, std::memory_order_relaxed); }
void note_phase(Phase phase) { current_phase.store(phase, std::memory_order_relaxed); }

InCollective::InCollective(Collective collective)
    : outer_(current_collective.load(std::memory_order_relaxed)),
      outer_since_(collective_since_ns.load(std::memory_order_relaxed)) {
  collective_since_ns.store(monotonic_ns(), std::memory_order_relaxed);
  current_collective.store(collective, std::memory_order_relaxed);
}

InCollective::~InCollective() {
  current_collective.store(outer_, std::memory_order_relaxed);
  collective_since_ns.store(outer_since_, std::memory_order_relaxed);
}

RankActivity current_activity() {
  RankActivity activity;
  activity.step = current_step.load(std::memory_order_relaxed);
  activity.phase = current_phase.load(std::memory_order_relaxed);
  activity.collective = current_collective.load(std::memory_order_relaxed);
  if (activity.collective != Collective::kNone)
    activity.waited_tenths = (monotonic_ns() - collective_since_ns.load(std::memory_order_relaxed)) / 100'000'000;
  return activity;
}

void format_activity_line(SignalSafeText& line, int64_t rank, std::string_view node, const RankActivity& activity) {
  line.text("rank=").integer(rank).text(" node=").text(node).text(" step=");
  if (activity.step >= 0)
    line.integer(activity.step);
  else
    line.text("-");
  const bool waiting = activity.collective != Collective::kNone;
  line.text(" phase=").text(waiting ? "collective" : phase_name(activity.phase));
  line.text(" collective=").text(collective_name(activity.collective)).text(" waited_s=");
  if (waiting)
    line.tenths(activity.waited_tenths);
  else
    line.text("-");
}

void install_hang_report_handler() {
  handler_thread = this_thread();
  // backtrace() loads libgcc's unwinder at its first call, which a signal handler must not do.
  void* frame = nullptr;
  backtrace(&frame, 1);
  struct sigaction action {};
  action.sa_handler = write_hang_report;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: the rank goes on waiting where it was, its system calls not failing with EINTR.
  action.sa_flags = SA_RESTART;
  sigaction(SIGQUIT, &action, nullptr);
}

void report_hangs_to(const RunLayout& run, int64_t rank, const std::string& node) {
  report_path = hang_report_path(run, rank);
  report_rank = rank;
  std::snprintf(report_node, sizeof(report_node), "%s", node.c_str());
  report_ready.store(true, std::memory_order_release);
}

}  // namespace trainctl

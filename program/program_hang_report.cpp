// trainctl-launch's hang report: see program_hang_report.h.
#include "program_hang_report.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>

namespace trainctl {

namespace {

std::atomic<pid_t> reported_pid{0};
std::atomic<const char*> reported_phase{"program"};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<const char*>::is_always_lock_free);

HangReportPath report_path;
int64_t report_rank = 0;
char report_node[256] = {};

// /proc/<pid>/<file>, NUL-terminated in `path`.
const char* proc_file(SignalSafeText& path, pid_t pid, std::string_view file) {
  return path.text("/proc/").integer(pid).text("/").text(file).c_str();
}

// What the file holds, up to `size` - 1 bytes; 0 where it cannot be read.
size_t read_proc_file(pid_t pid, std::string_view file, char* buffer, size_t size) {
  SignalSafeText path;
  const int fd = open(proc_file(path, pid, file), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t got = 0;
  for (ssize_t read_now; got + 1 < size && (read_now = read(fd, buffer + got, size - 1 - got)) != 0;) {
    if (read_now < 0 && errno == EINTR) continue;
    if (read_now < 0) break;
    got += static_cast<size_t>(read_now);
  }
  close(fd);
  return got;
}

// The state letter of /proc/PID/stat: the field after the command, which is in parentheses and may
// hold any character, so the last ')' ends it.
std::string_view process_state(pid_t pid, char (&stat)[1024]) {
  const std::string_view text(stat, read_proc_file(pid, "stat", stat, sizeof(stat)));
  const size_t end_of_command = text.rfind(')');
  if (end_of_command == std::string_view::npos || end_of_command + 2 >= text.size()) return "-";
  return text.substr(end_of_command + 2, 1);
}

// /proc/PID/wchan's symbol ("do_wait", or "0" for a running process), to its first blank.
std::string_view kernel_wait(pid_t pid, char (&wchan)[128]) {
  std::string_view text(wchan, read_proc_file(pid, "wchan", wchan, sizeof(wchan)));
  text = text.substr(0, text.find_first_of(" \t\n"));
  return text.empty() ? "-" : text;
}

extern "C" void write_program_hang_report(int) {
  const int saved_errno = errno;
  const pid_t pid = reported_pid.load();
  char stat[1024], wchan[128];
  SignalSafeText line;
  format_program_line(line, report_rank, report_node, reported_phase.load(), pid,
                      pid > 0 ? process_state(pid, stat) : "-", pid > 0 ? kernel_wait(pid, wchan) : "-");
  if (const int fd = start_hang_report(report_path, line.view()); fd >= 0) {
    write_all(fd, "stack:\n");
    SignalSafeText path;
    const int stack = pid > 0 ? open(proc_file(path, pid, "stack"), O_RDONLY | O_CLOEXEC) : -1;
    char chunk[4096];
    ssize_t got = stack >= 0 ? read(stack, chunk, sizeof(chunk)) : -1;
    if (got < 0) write_all(fd, "(the program's kernel stack cannot be read here: /proc/PID/stack needs root)\n");
    for (; got > 0; got = read(stack, chunk, sizeof(chunk))) write_all(fd, {chunk, static_cast<size_t>(got)});
    if (stack >= 0) close(stack);
    close(fd);
  }
  errno = saved_errno;
}

}  // namespace

void format_program_line(SignalSafeText& line, int64_t rank, std::string_view node, std::string_view phase, pid_t pid,
                         std::string_view state, std::string_view wchan) {
  line.text("rank=").integer(rank).text(" node=").text(node).text(" phase=").text(phase).text(" pid=");
  if (pid > 0)
    line.integer(pid);
  else
    line.text("-");
  line.text(" state=").text(state).text(" wchan=").text(wchan);
}

void install_program_hang_report(const RunLayout& run, int64_t rank, const std::string& node) {
  report_path = hang_report_path(run, rank);
  report_rank = rank;
  std::snprintf(report_node, sizeof(report_node), "%s", node.c_str());
  struct sigaction action {};
  action.sa_handler = write_program_hang_report;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: the wait for the program goes on.
  action.sa_flags = SA_RESTART;
  sigaction(SIGQUIT, &action, nullptr);
}

void report_on_process(pid_t pid, const char* phase) {
  reported_phase.store(phase);
  reported_pid.store(pid);
}

}  // namespace trainctl

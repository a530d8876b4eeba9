// One rank of a [program] job: see program_rank.h.
#include "program_rank.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "atomic_file.h"
#include "check.h"
#include "config_reader.h"
#include "program_spec.h"

extern char** environ;

namespace trainctl {

namespace {

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : kStopSignals) sigaddset(&set, signal);
  return set;
}

// This process must not die of a stop signal before its program has ended: a handler that does
// nothing (unlike SIG_IGN) is reset to the default by exec, so the program gets them as usual.
void outlive_stop_signals() {
  struct sigaction action {};
  action.sa_handler = [](int) {};
  sigemptyset(&action.sa_mask);
  for (int signal : kStopSignals) sigaction(signal, &action, nullptr);
}

// "NAME=value" for the inherited environment with `added` put over it.
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& added) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    const bool replaced = std::any_of(added.begin(), added.end(), [&](const auto& pair) { return pair.first == name; });
    if (!replaced) entries.emplace_back(text);
  }
  for (const auto& [name, value] : added) entries.push_back(name + "=" + value);
  return entries;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// In the forked child, with the stop signals blocked since before the fork. A stop signal that
// came in between is still pending: with the default action restored it ends the child when
// they are unblocked, and the rank's end records it, instead of the do-nothing handler
// swallowing the job's only warning. (The child of a single-threaded process: strerror and
// dprintf are safe here.)
[[noreturn]] void exec_program(const std::string& workdir, char* const* argv, char* const* envp,
                               const sigset_t& unblocked) {
  for (int signal : kStopSignals) std::signal(signal, SIG_DFL);
  sigprocmask(SIG_SETMASK, &unblocked, nullptr);
  if (!workdir.empty() && chdir(workdir.c_str()) != 0) {
    const int chdir_errno = errno;
    dprintf(STDERR_FILENO, "trainctl-launch: cannot enter the program's workdir %s: %s\n", workdir.c_str(),
            strerror(chdir_errno));
    _exit(127);
  }
  execvpe(argv[0], argv, envp);
  const int exec_errno = errno;
  dprintf(STDERR_FILENO, "trainctl-launch: cannot run %s: %s\n", argv[0], strerror(exec_errno));
  _exit(exec_errno == ENOENT ? 127 : 126);
}

// The step the program last recorded in progress.step, "0" when it recorded none.
std::string recorded_step(const RunLayout& run) {
  std::ifstream in(run.progress());
  std::string step;
  if (!std::getline(in, step) || step.empty() || step.find_first_not_of("0123456789") != std::string::npos) return "0";
  return step;
}

}  // namespace

int exit_code_of(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

void record_rank_end(const RunLayout& run, int64_t rank, int wait_status) {
  const auto ended = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  std::filesystem::create_directories(run.rank_exits());
  write_file_atomically(run.rank_exits() + "/" + std::to_string(rank),
                        WIFEXITED(wait_status)
                            ? fmt::format("exit {} {}\n", WEXITSTATUS(wait_status), ended.count())
                            : fmt::format("signal {} {}\n", WTERMSIG(wait_status), ended.count()));
}

int run_program_rank(const RunLayout& run, const RankPlace& place) {
  const ProgramSpec program = parse_program_spec(parse_config_file(run.config()), run.config());
  std::vector<std::string> argv = program_argv(program, run);
  std::vector<std::string> environment = environment_with(rank_environment(place, run));

  outlive_stop_signals();
  const std::vector<char*> argv_pointers = c_strings(argv);
  const std::vector<char*> environment_pointers = c_strings(environment);
  const sigset_t stop_signals = stop_signal_set();
  sigset_t unblocked;
  sigprocmask(SIG_BLOCK, &stop_signals, &unblocked);
  const pid_t child = fork();
  if (child == 0) exec_program(program.workdir, argv_pointers.data(), environment_pointers.data(), unblocked);
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &unblocked, nullptr);
  if (child < 0) throw std::system_error(fork_errno, std::generic_category(), "cannot fork");

  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "cannot wait for the program");
  }
  record_rank_end(run, place.rank, status);
  const int code = exit_code_of(status);
  if (code != 0)
    fmt::print(stderr, "trainctl-launch: rank {} on {}: {} {}\n", place.rank, this_host_name(), argv[0],
               WIFEXITED(status)
                   ? fmt::format("exited with code {}", code)
                   : fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status))));
  if (code == 0 && place.rank == 0) write_file_atomically(run.completed(), recorded_step(run) + "\n");
  return code;
}

}  // namespace trainctl

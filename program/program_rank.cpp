// One rank of a [program] job: see program_rank.h.
#include "program_rank.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "atomic_file.h"
#include "config_reader.h"
#include "program_spec.h"

extern char** environ;

namespace trainctl {

namespace {

// Signals that ask a job to stop. This process must not die of them before its program has
// ended: a handler that does nothing (unlike SIG_IGN) is reset to the default by exec, so the
// program gets them as usual.
void outlive_stop_signals() {
  struct sigaction action {};
  action.sa_handler = [](int) {};
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaction(signal, &action, nullptr);
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

// In the forked child: only async-signal-safe calls, and _exit.
[[noreturn]] void exec_program(const std::string& workdir, char* const* argv, char* const* envp) {
  if (!workdir.empty() && chdir(workdir.c_str()) != 0) {
    dprintf(STDERR_FILENO, "trainctl-launch: cannot enter the program's workdir %s: %s\n", workdir.c_str(),
            strerror(errno));
    _exit(127);
  }
  execvpe(argv[0], argv, envp);
  dprintf(STDERR_FILENO, "trainctl-launch: cannot run %s: %s\n", argv[0], strerror(errno));
  _exit(errno == ENOENT ? 127 : 126);
}

// One line, written at once with O_APPEND, so the ranks' lines never interleave.
void append_line(const std::string& path, const std::string& line) {
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot write " + path);
  const ssize_t written = write(fd, line.data(), line.size());
  const int write_errno = errno;
  close(fd);
  if (written != static_cast<ssize_t>(line.size()))
    throw std::system_error(write_errno, std::generic_category(), "cannot write " + path);
}

// The step the program last recorded in progress.step, "0" when it recorded none.
std::string recorded_step(const RunLayout& run) {
  std::ifstream in(run.progress());
  std::string step;
  if (!std::getline(in, step) || step.empty() || step.find_first_not_of("0123456789") != std::string::npos) return "0";
  return step;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

int run_program_rank(const RunLayout& run, const RankPlace& place) {
  const ProgramSpec program = parse_program_spec(parse_config_file(run.config()), run.config());
  std::vector<std::string> argv = program_argv(program, run);
  std::vector<std::string> environment = environment_with(rank_environment(place, run));
  write_file_atomically(run.params(), params_json_text(program));

  outlive_stop_signals();
  const std::vector<char*> argv_pointers = c_strings(argv);
  const std::vector<char*> environment_pointers = c_strings(environment);
  const pid_t child = fork();
  if (child < 0) throw std::system_error(errno, std::generic_category(), "cannot fork");
  if (child == 0) exec_program(program.workdir, argv_pointers.data(), environment_pointers.data());

  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "cannot wait for the program");
  }
  const bool exited = WIFEXITED(status);
  const int code = exited ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  append_line(run.program_exits(), exited ? fmt::format("rank {} exit {}\n", place.rank, code)
                                          : fmt::format("rank {} signal {}\n", place.rank, WTERMSIG(status)));
  if (code != 0)
    fmt::print(stderr, "trainctl-launch: rank {} on {}: {} {}\n", place.rank, host_name(), argv[0],
               exited ? fmt::format("exited with code {}", code)
                      : fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status))));
  if (code == 0 && place.rank == 0) write_file_atomically(run.completed(), recorded_step(run) + "\n");
  return code;
}

}  // namespace trainctl

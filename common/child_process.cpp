// Child processes: see child_process.h.
// Between fork and exec the child makes only async-signal-safe calls, on arguments prepared
// before the fork. Every descriptor opened here is close-on-exec; dup2 clears that flag on the
// copies, so a program gets them only as its stdin, stdout and stderr.
#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace trainctl {

namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Closes on scope exit, so that an exception cannot leak descriptors into later children.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor() { close(); }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    close();
    fd_ = std::exchange(other.fd_, -1);
    return *this;
  }

  int get() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

struct Pipe {
  FileDescriptor read;
  FileDescriptor write;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  return {FileDescriptor(fds[0]), FileDescriptor(fds[1])};
}

FileDescriptor open_file(const std::string& path, int flags) {
  FileDescriptor file(::open(path.c_str(), flags | O_CLOEXEC, 0644));
  if (file.get() < 0) throw_errno(fmt::format("cannot open {}", path));
  return file;
}

// What a child that failed before its program ran tells the parent through the status pipe.
struct StartFailure {
  enum Step : int { kWorkdir, kExec } step;
  int error;
};

// Null-terminated pointers into `strings`, which must outlive them.
std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const std::string& text : strings) pointers.push_back(const_cast<char*>(text.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Forks with every signal blocked. The child gets the mask from before, to restore once it is
// ready for signals, and runs `in_child`, which does not return.
template <typename InChild>
pid_t fork_blocked(const ChildPlacement& placement, const InChild& in_child) {
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (placement.own_process_group) ::setpgid(0, 0);
    in_child(before);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) throw std::system_error(fork_errno, std::generic_category(), "cannot fork");
  // Also here: the group must exist before this process signals it.
  if (placement.own_process_group) ::setpgid(pid, pid);
  return pid;
}

// Every signal this process handles is set to its default action: the handlers belong to this
// program, not to the one about to be executed.
void default_handled_signals() {
  for (int signal = 1; signal < NSIG; ++signal) {
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) != 0) continue;  // a number the C library reserves
    if (current.sa_handler == SIG_IGN || current.sa_handler == SIG_DFL) continue;
    current.sa_handler = SIG_DFL;
    current.sa_flags = 0;
    ::sigaction(signal, &current, nullptr);
  }
}

// A program's start, prepared before the fork. -1 for a stream: inherited.
struct ExecPlan {
  std::vector<char*> argv;
  std::vector<char*> environment;  // empty: this process's
  const char* workdir = nullptr;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  ChildPlacement placement;
};

[[noreturn]] void exec_in_child(const ExecPlan& plan, const sigset_t& mask, int status_fd) {
  default_handled_signals();
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  if (plan.stdin_fd >= 0) ::dup2(plan.stdin_fd, STDIN_FILENO);
  if (plan.stdout_fd >= 0) ::dup2(plan.stdout_fd, STDOUT_FILENO);
  if (plan.stderr_fd >= 0) ::dup2(plan.stderr_fd, STDERR_FILENO);
  StartFailure failure{StartFailure::kWorkdir, 0};
  if (plan.workdir == nullptr || ::chdir(plan.workdir) == 0) {
    failure.step = StartFailure::kExec;
    if (plan.environment.empty())
      ::execvp(plan.argv[0], plan.argv.data());
    else
      ::execvpe(plan.argv[0], plan.argv.data(), plan.environment.data());
  }
  failure.error = errno;
  // Should even this fail, the parent takes the child's exit 127 for its program's.
  [[maybe_unused]] const ssize_t reported = ::write(status_fd, &failure, sizeof failure);
  ::_exit(127);
}

// A StartFailure, or nothing once the exec succeeded and closed the pipe.
std::optional<StartFailure> read_start_failure(int fd) {
  StartFailure failure{};
  ssize_t got;
  do {
    got = ::read(fd, &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof failure)) return std::nullopt;
  return failure;
}

std::optional<ProcessEnd> wait_for(pid_t pid, int options) {
  int status = 0;
  pid_t ended;
  while ((ended = ::waitpid(pid, &status, options)) < 0)
    if (errno != EINTR) throw_errno("cannot wait for a child process");
  if (ended == 0) return std::nullopt;
  return WIFSIGNALED(status) ? ProcessEnd::killed(WTERMSIG(status)) : ProcessEnd::exited(WEXITSTATUS(status));
}

// Starts the program of `plan` and returns once it runs, or throws CannotStart once the child
// that could not start it has been reaped.
Child start_planned(const ExecPlan& plan, const std::string& workdir) {
  Pipe status = make_pipe();
  const pid_t pid = fork_blocked(plan.placement, [&](const sigset_t& mask) {
    exec_in_child(plan, mask, status.write.get());
  });
  status.write.close();
  const std::optional<StartFailure> failure = read_start_failure(status.read.get());
  const Child child(pid, plan.placement.own_process_group);
  if (!failure) return child;
  child.wait();
  const std::string program = plan.argv[0];
  throw CannotStart(failure->error, failure->step == StartFailure::kWorkdir
                                        ? fmt::format("cannot enter the workdir {} to run {}", workdir, program)
                                        : fmt::format("cannot run {}", program));
}

void check_argv(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("a child process needs a program to run: argv is empty");
}

// stdout and stderr together, with poll(): reading one pipe to its end first would deadlock once
// the child filled the other one.
void read_both(int out_fd, int err_fd, std::string& out, std::string& err) {
  std::array<pollfd, 2> fds{{{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}}};
  std::array<std::string*, 2> sinks{&out, &err};
  std::array<char, 65536> buffer;
  int open_pipes = 2;
  while (open_pipes > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw_errno("poll");
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (got > 0) {
        sinks[i]->append(buffer.data(), static_cast<size_t>(got));
      } else if (got == 0) {
        fds[i].fd = -1;  // poll skips negative descriptors
        --open_pipes;
      } else if (errno != EINTR) {
        throw_errno("read");
      }
    }
  }
}

}  // namespace

std::string ProcessEnd::description() const {
  if (how == How::kExited) return fmt::format("exited with code {}", number);
  return fmt::format("was killed by signal {} ({})", number, strsignal(number));
}

ProcessEnd Child::wait() const { return *wait_for(pid_, 0); }

std::optional<ProcessEnd> Child::poll() const { return wait_for(pid_, WNOHANG); }

void Child::signal(int signal) const {
  if (own_process_group_)
    ::killpg(pid_, signal);
  else
    ::kill(pid_, signal);
}

Child start(const Command& command) {
  check_argv(command.argv);
  ExecPlan plan;
  plan.argv = c_strings(command.argv);
  if (command.environment) plan.environment = c_strings(*command.environment);
  if (!command.workdir.empty()) plan.workdir = command.workdir.c_str();
  plan.placement = command.placement;
  FileDescriptor input, output;
  if (!command.input_file.empty() || command.placement.stdin_from_null) {
    input = open_file(command.input_file.empty() ? "/dev/null" : command.input_file, O_RDONLY);
    plan.stdin_fd = input.get();
  }
  if (!command.output_file.empty()) {
    output = open_file(command.output_file, O_WRONLY | O_CREAT | O_TRUNC);
    plan.stdout_fd = plan.stderr_fd = output.get();
  }
  return start_planned(plan, command.workdir);
}

Child start_function(const ChildPlacement& placement, const std::function<int()>& body) {
  // Output still buffered here would be written by both processes.
  std::fflush(nullptr);
  FileDescriptor input;
  if (placement.stdin_from_null) input = open_file("/dev/null", O_RDONLY);
  const pid_t pid = fork_blocked(placement, [&](const sigset_t& mask) noexcept {
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    if (input.get() >= 0) {
      ::dup2(input.get(), STDIN_FILENO);
      ::close(input.get());
    }
    const int code = body();
    std::fflush(nullptr);
    ::_exit(code);
  });
  return Child(pid, placement.own_process_group);
}

CapturedRun run_capturing(const std::vector<std::string>& argv) {
  check_argv(argv);
  const FileDescriptor input = open_file("/dev/null", O_RDONLY);
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  ExecPlan plan;
  plan.argv = c_strings(argv);
  plan.stdin_fd = input.get();
  plan.stdout_fd = out.write.get();
  plan.stderr_fd = err.write.get();
  const Child child = start_planned(plan, "");
  out.write.close();
  err.write.close();
  CapturedRun run;
  read_both(out.read.get(), err.read.get(), run.out, run.err);
  run.end = child.wait();
  return run;
}

std::optional<std::pair<Child, ProcessEnd>> take_ended(std::vector<Child>& children) {
  for (auto child = children.begin(); child != children.end(); ++child) {
    if (const std::optional<ProcessEnd> end = child->poll()) {
      std::pair<Child, ProcessEnd> ended{*child, *end};
      children.erase(child);
      return ended;
    }
  }
  return std::nullopt;
}

}  // namespace trainctl

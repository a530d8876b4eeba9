// ProcessRunner: see command_runner.h.
// stdout and stderr are read together with poll(): reading one pipe to its end first would
// deadlock once the child fills the other one. A third close-on-exec pipe tells the parent
// whether execvp failed, and why, so "not found" is not confused with a program exiting 127.
#include "command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace trainctl {

namespace {

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

// Closes on scope exit, so an exception cannot leak descriptors into later children.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() { close(); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

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

// The errno of a failed execvp, or 0 once the exec succeeded and closed the pipe.
int read_exec_errno(int fd) {
  int error = 0;
  ssize_t got;
  do {
    got = ::read(fd, &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  return got == static_cast<ssize_t>(sizeof error) ? error : 0;
}

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
      ssize_t got = ::read(fds[i].fd, buffer.data(), buffer.size());
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

int wait_exit_code(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw_errno("waitpid");
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

CommandResult ProcessRunner::run(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("ProcessRunner::run: empty argv");
  std::vector<char*> exec_args;
  for (const std::string& arg : argv) exec_args.push_back(const_cast<char*>(arg.c_str()));
  exec_args.push_back(nullptr);

  FileDescriptor null_input(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (null_input.get() < 0) throw_errno("open /dev/null");
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  Pipe exec_status = make_pipe();

  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec. Every descriptor opened here is
    // close-on-exec; dup2 clears that flag on the copies, so the program gets them only as
    // stdin, stdout and stderr.
    ::dup2(null_input.get(), STDIN_FILENO);
    ::dup2(out.write.get(), STDOUT_FILENO);
    ::dup2(err.write.get(), STDERR_FILENO);
    ::execvp(exec_args[0], exec_args.data());
    int error = errno;
    // Should even this fail, the parent still sees exit code 127, only without the reason.
    [[maybe_unused]] ssize_t reported = ::write(exec_status.write.get(), &error, sizeof error);
    ::_exit(127);
  }

  out.write.close();
  err.write.close();
  exec_status.write.close();
  int exec_error = read_exec_errno(exec_status.read.get());
  CommandResult result;
  read_both(out.read.get(), err.read.get(), result.out, result.err);
  result.exit_code = wait_exit_code(pid);
  if (exec_error == ENOENT) {
    result.exit_code = 127;
    result.err = argv[0] + ": not found";
  } else if (exec_error != 0) {
    result.exit_code = 126;
    result.err = argv[0] + ": " + std::generic_category().message(exec_error);
  }
  return result;
}

}  // namespace trainctl

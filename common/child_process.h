// Child processes: the one place where trainctl's programs fork, exec and wait. A child ends in
// one of two ways (it exited with a code, or a signal killed it), and a program that could not be
// started is a third thing, an error of its own (CannotStart), told apart through a close-on-exec
// pipe: never an exit code 127 that the program itself may also have exited with.
// Signals are blocked across fork, so that none runs this process's handlers in the child; a
// child that execs takes the default action for every signal this process handles until the
// exec (which would reset them anyway), so that a stop signal arriving in between ends the child
// as it would end the program, instead of a handler's copy swallowing it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace trainctl {

// How a started child ended.
struct ProcessEnd {
  enum class How { kExited, kKilled };
  How how = How::kExited;
  int number = 0;  // the exit code, or the signal that killed it

  static ProcessEnd exited(int code) { return {How::kExited, code}; }
  static ProcessEnd killed(int signal) { return {How::kKilled, signal}; }
  bool operator==(const ProcessEnd&) const = default;

  // As a shell reports it: the exit code, or 128 + N for signal N.
  int shell_code() const { return how == How::kExited ? number : 128 + number; }
  // "exited with code 3", "was killed by signal 9 (Killed)": to follow the program's name.
  std::string description() const;
};

// A program that could not be started: its workdir could not be entered, or it could not be
// executed (code() ENOENT: not found). what(): "cannot run PROGRAM: No such file or directory".
class CannotStart : public std::system_error {
 public:
  CannotStart(int error, const std::string& what) : std::system_error(error, std::generic_category(), what) {}
  bool not_found() const { return code() == std::errc::no_such_file_or_directory; }
  // As a shell reports it: 127 for a program not found, 126 for one it cannot execute.
  int shell_code() const { return not_found() ? 127 : 126; }
};

// How a child is placed: its stdin and its process group, for a program and a function alike.
struct ChildPlacement {
  bool stdin_from_null = false;    // else inherited; a batch job's ranks have no terminal to read
  bool own_process_group = false;  // a group of its own, which Child::signal() then reaches whole
};

// A program to start, without a shell between.
struct Command {
  std::vector<std::string> argv{};  // argv[0] is looked up on PATH
  std::optional<std::vector<std::string>> environment{};  // "NAME=value" entries; unset: this process's
  std::string workdir{};                                  // empty: this process's
  std::string output_file{};  // stdout and stderr are written to it (truncated first); empty: inherited
  std::string input_file{};   // stdin is read from it; empty: as placement says
  ChildPlacement placement{};
};

class Child {
 public:
  explicit Child(pid_t pid, bool own_process_group) : pid_(pid), own_process_group_(own_process_group) {}

  pid_t pid() const { return pid_; }
  ProcessEnd wait() const;
  // Without blocking: nullopt while the child runs.
  std::optional<ProcessEnd> poll() const;
  // Sends `signal` to the child, or to its whole group when it has one of its own.
  void signal(int signal) const;

 private:
  pid_t pid_;
  bool own_process_group_;
};

// Starts `command` and returns once its program runs. Throws CannotStart, or std::system_error
// when a resource of this process fails (fork, a pipe, the output file).
Child start(const Command& command);

// Runs `body` in a forked child, which exits with the code it returns. The child is this same
// program: it keeps this process's signal handlers. An exception escaping `body` aborts the child
// rather than unwinding into a copy of its caller.
Child start_function(const ChildPlacement& placement, const std::function<int()>& body);

// Runs argv with stdin from /dev/null, capturing stdout and stderr, and waits for it to end.
// Throws as start() does.
struct CapturedRun {
  ProcessEnd end;
  std::string out;
  std::string err;
};
CapturedRun run_capturing(const std::vector<std::string>& argv);

// The first of `children` found to have ended, taken out of the list with its end; nullopt while
// every one runs. Waits for none.
std::optional<std::pair<Child, ProcessEnd>> take_ended(std::vector<Child>& children);

}  // namespace trainctl

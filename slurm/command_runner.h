// The command-runner seam: SLURM commands are run through CommandRunner so unit tests can
// substitute canned outputs; ProcessRunner runs real programs, without a shell.
#pragma once

#include <string>
#include <vector>

namespace trainctl {

struct CommandResult {
  int exit_code = -1;  // the program's exit status, 128 + signal when a signal ended it
  std::string out;
  std::string err;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // argv[0] is looked up on PATH.
  virtual CommandResult run(const std::vector<std::string>& argv) = 0;
};

// Runs argv directly (run_capturing, stdin from /dev/null) and captures stdout and stderr.
// A program that cannot be found gives exit code 127 and err "<program>: not found"; one
// that cannot be executed gives 126 and err "<program>: <reason>": told apart from a program
// that exits 127 or 126 itself, whose err is its own.
class ProcessRunner : public CommandRunner {
 public:
  CommandResult run(const std::vector<std::string>& argv) override;
};

}  // namespace trainctl

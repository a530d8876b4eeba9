// ProcessRunner: see command_runner.h. The child process itself is common/child_process.h's.
#include "command_runner.h"

#include "child_process.h"

namespace trainctl {

CommandResult ProcessRunner::run(const std::vector<std::string>& argv) {
  try {
    CapturedRun run = run_capturing(argv);
    return {run.end.shell_code(), std::move(run.out), std::move(run.err)};
  } catch (const CannotStart& error) {
    return {error.shell_code(), "", argv[0] + ": " + (error.not_found() ? "not found" : error.code().message())};
  }
}

}  // namespace trainctl

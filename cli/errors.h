// The CLI's typed errors. Subcommands throw; main catches once and maps each to an exit code:
// 0 ok, 1 runtime failure, 2 bad input or usage. (ConfigError, from runtime/config_reader.h,
// is bad input too; SlurmError and CheckpointError are runtime failures.)
#pragma once

#include <stdexcept>

namespace trainctl {

namespace cli_exit {
constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kBadInput = 2;
}  // namespace cli_exit

// Wrong arguments or input files: exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something that should have worked did not (a run failed, a checkpoint is bad): exit 1.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace trainctl

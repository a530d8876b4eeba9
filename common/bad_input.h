// Input that cannot work as given (a data file, a checkpoint or a device that does not fit the
// config): bad input, exit code 2 in both programs, with a message naming the file or key at fault.
// (ConfigError, for the config file itself, is reported with its source region instead.)
#pragma once

#include <stdexcept>

namespace trainctl {

class BadInput : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace trainctl

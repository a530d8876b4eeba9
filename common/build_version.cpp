// This build's version: see build_version.h.
#include "build_version.h"

#include <fmt/format.h>

#include "revision.h"

namespace trainctl {

std::string build_version() { return fmt::format("{} ({})", TRAINCTL_VERSION, TRAINCTL_REVISION); }

}  // namespace trainctl

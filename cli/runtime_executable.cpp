// Where trainctl-runtime is: see commands.h.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "commands.h"
#include "errors.h"

namespace trainctl {

std::string runtime_executable() {
  if (const char* configured = std::getenv("TRAINCTL_RUNTIME"); configured != nullptr && *configured != '\0')
    return std::filesystem::absolute(configured).string();
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  for (const auto& candidate : {self / "trainctl-runtime", self.parent_path() / "runtime" / "trainctl-runtime"})
    if (access(candidate.c_str(), X_OK) == 0) return candidate.lexically_normal().string();
  throw Failure(fmt::format("trainctl-runtime not found next to {} (set TRAINCTL_RUNTIME)", self.string()));
}

}  // namespace trainctl

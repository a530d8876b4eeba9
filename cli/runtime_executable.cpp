// Where trainctl-runtime and trainctl-launch are, and trainctl itself for the batch script: see
// commands.h.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "commands.h"
#include "errors.h"

namespace trainctl {

namespace {
std::string companion_executable(const char* name, const char* variable, const char* build_folder) {
  if (const char* configured = std::getenv(variable); configured != nullptr && *configured != '\0')
    return std::filesystem::absolute(configured).string();
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  for (const auto& candidate : {self / name, self.parent_path() / build_folder / name})
    if (access(candidate.c_str(), X_OK) == 0) return candidate.lexically_normal().string();
  throw Failure(fmt::format("{} not found next to {} (set {})", name, self.string(), variable));
}
}  // namespace

std::string runtime_executable() { return companion_executable("trainctl-runtime", "TRAINCTL_RUNTIME", "runtime"); }

RankCommand rank_command(const toml::table& config) {
  if (has_program(config)) return {companion_executable("trainctl-launch", "TRAINCTL_LAUNCH", "program"), true};
  return {runtime_executable(), false};
}

std::string trainctl_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::optional<std::string> notifier_executable(const toml::table& config) {
  if (!config.contains("notify")) return std::nullopt;
  return trainctl_executable();
}

}  // namespace trainctl

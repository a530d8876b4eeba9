// A checkpoint named on the command line: see stored_checkpoint.h.
#include "runs/stored_checkpoint.h"

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint_directory.h"
#include "config_reader.h"
#include "errors.h"
#include "registry.h"
#include "run_layout.h"

namespace trainctl {

StoredCheckpoint load_stored_checkpoint(const std::string& run_or_checkpoint) {
  const std::string& path = run_or_checkpoint;
  if (!std::filesystem::exists(path)) throw UsageError(fmt::format("{} does not exist", path));
  ResumePoint found;
  if (is_one_checkpoint(path)) {
    found = {load_checkpoint(path), path, {}};
  } else {
    const std::string run_checkpoints = RunLayout(path).checkpoints();
    found = load_latest_valid(std::filesystem::is_directory(run_checkpoints) ? run_checkpoints : path);
    if (!found.checkpoint && found.skipped.empty()) throw UsageError(fmt::format("no checkpoint in {}", path));
    if (!found.checkpoint)
      throw Failure(fmt::format("no checkpoint in {} verifies:\n  {}", path, fmt::join(found.skipped, "\n  ")));
    for (const std::string& skipped : found.skipped) fmt::print(stderr, "trainctl: skipped {}\n", skipped);
  }
  const std::string config_name = fmt::format("{} (its stored config)", found.path);
  ModelSpec model = parse_run_spec(parse_config_text(found.checkpoint->meta.config_text, config_name), config_name).model;
  return {found.path, std::move(*found.checkpoint), std::move(model)};
}

}  // namespace trainctl

// A run's checkpoints directory: see checkpoint_directory.h.
#include "checkpoint_directory.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "check.h"
#include "checkpoint_file.h"
#include "sharded_checkpoint.h"

namespace trainctl {

namespace fs = std::filesystem;

namespace {

// The step a step-N.h5 file's or a step-N directory's name carries; none for other names. At most
// 18 digits, so that it fits int64.
std::optional<int64_t> step_in_file_name(const std::string& file_name) {
  static const std::regex name_pattern(R"(step-(\d{1,18})(\.h5)?)");
  std::smatch match;
  if (!std::regex_match(file_name, match, name_pattern)) return std::nullopt;
  return std::stoll(match[1].str());
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  try {
    Checkpoint checkpoint = fs::is_directory(path) ? load_sharded_checkpoint(path) : load_checkpoint_file(path);
    const std::optional<int64_t> named_step = step_in_file_name(fs::path(path).filename().string());
    if (named_step && *named_step != checkpoint.meta.step)
      throw CheckpointError(
          fmt::format("its name says step {} but it stores step {}", *named_step, checkpoint.meta.step));
    return checkpoint;
  } catch (const CheckFailure& failure) {
    throw CheckpointError(fmt::format("{}: not a readable checkpoint ({})", path, failure.what()));
  } catch (const CheckpointError& error) {
    throw CheckpointError(fmt::format("{}: {}", path, error.what()));
  }
}

bool is_one_checkpoint(const std::string& path) {
  if (fs::is_regular_file(path)) return true;
  if (!fs::is_directory(path)) return false;
  if (fs::exists(fs::path(path) / kManifestName)) return true;
  for (const auto& file : fs::directory_iterator(path))
    if (file.path().filename().string().starts_with("shard-")) return true;
  return false;
}

uint64_t checkpoint_bytes(const std::string& path) {
  if (!fs::is_directory(path)) return fs::file_size(path);
  uint64_t bytes = 0;
  for (const auto& file : fs::directory_iterator(path))
    if (file.is_regular_file()) bytes += file.file_size();
  return bytes;
}

std::vector<CheckpointEntry> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointEntry> entries;
  if (!fs::is_directory(dir)) return entries;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    // A step-N.h5 that is a directory, or a step-N that is a file, is neither shape.
    if (entry.is_directory() == name.ends_with(".h5")) continue;
    if (const std::optional<int64_t> step = step_in_file_name(name)) entries.push_back({entry.path().string(), *step});
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return entries;
}

ResumePoint load_latest_valid(const std::string& dir) {
  ResumePoint resume;
  for (const CheckpointEntry& entry : list_checkpoints(dir)) {
    try {
      resume.checkpoint = load_checkpoint(entry.path);
      resume.path = entry.path;
      return resume;
    } catch (const CheckpointError& error) {
      resume.skipped.push_back(error.what());
    }
  }
  return resume;
}

void prune_checkpoints(const std::string& dir, int64_t keep_last) {
  // Temporaries left by a writer that crashed, sidecars whose file a crash kept from being
  // published, and step directories whose manifest it kept from being written; saves are
  // serialized and none is in flight when the saver prunes, so none is in use now.
  static const std::regex temporary_pattern(R"(\.step-\d+\.(h5|json)\.tmp-\d+)");
  static const std::regex sidecar_pattern(R"(step-\d+\.json)");
  for (const auto& file : fs::directory_iterator(dir)) {
    const std::string name = file.path().filename().string();
    if (std::regex_match(name, temporary_pattern) ||
        (std::regex_match(name, sidecar_pattern) && !fs::exists(fs::path(file.path()).replace_extension(".h5"))) ||
        (file.is_directory() && step_in_file_name(name) && !fs::exists(file.path() / kManifestName)))
      fs::remove_all(file.path());
  }
  std::vector<CheckpointEntry> entries = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(keep_last); i < entries.size(); ++i) {
    fs::remove_all(entries[i].path);
    fs::remove(sidecar_path(entries[i].path));
  }
}

}  // namespace trainctl

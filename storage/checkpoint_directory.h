// A run's checkpoints directory, whichever shape its checkpoints have (step-N.h5 files,
// checkpoint_file.h; step-N directories of shards, sharded_checkpoint.h): reading one checkpoint
// by its path, listing them newest first, picking the newest that verifies, and pruning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint.h"

namespace trainctl {

// A step directory is read whole, at any world size; a file is verified by its sidecar first.
// Either way, a step-N name must match the stored step. Throws CheckpointError naming the path and
// the problem.
Checkpoint load_checkpoint(const std::string& path);

// Whether `path` names one checkpoint rather than a folder of them: a file, or a sharded step
// directory (one that holds a manifest or shards).
bool is_one_checkpoint(const std::string& path);
// The bytes a checkpoint takes on disk: its file, or the files of its step directory.
uint64_t checkpoint_bytes(const std::string& path);

struct CheckpointEntry {
  std::string path;
  int64_t step = 0;
};
// The step-N.h5 files and step-N directories of `dir`, newest first (temporary files are never
// listed; a directory is listed whether or not its save finished, and fails to load if not).
std::vector<CheckpointEntry> list_checkpoints(const std::string& dir);

struct ResumePoint {
  std::optional<Checkpoint> checkpoint;  // empty: start from scratch
  std::string path;
  std::vector<std::string> skipped;      // "path: problem" for each newer file that failed to verify
};
// The newest checkpoint in `dir` that verifies, falling back past corrupt ones.
ResumePoint load_latest_valid(const std::string& dir);

// Deletes all but the newest `keep_last` checkpoints (and their sidecars), and what a crashed
// save left behind: temporaries, and step directories without a manifest. Only while no save is
// in flight.
void prune_checkpoints(const std::string& dir, int64_t keep_last);

}  // namespace trainctl

// Sharded checkpoints: one step directory written by every rank at once, each rank its own range
// of the flat state (the parameters and each optimizer state, laid out alike), so that no rank
// needs the whole state and the writes run in parallel. Layout (docs/checkpoint-format.md):
//   <dir>/step-N/shard-R-of-W.h5  rank R's range [begin, end): /model and /optimizer/<state>,
//                                 float32 [end - begin], a CRC-32 on each; the training position
//                                 as attributes on "/", as a checkpoint file has them, and the
//                                 range as shard_rank, shard_ranks, shard_begin, shard_end
//   <dir>/step-N/manifest.json    written last, by rank 0, once every shard is on disk: the
//                                 tensors' names, shapes and offsets in the flat state, and each
//                                 shard file with its range, size and CRC-32
// A step directory is a checkpoint once its manifest is published and every file it lists has the
// size and checksum it records; load_checkpoint (checkpoint_directory.h) reads one whole, at any
// world size, and list_checkpoints, load_latest_valid and prune_checkpoints treat it as they treat
// a step-N.h5.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.h"

namespace trainctl {

// Where each tensor lies in the flat state, and which optimizer states it has.
struct FlatTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
};
struct FlatLayout {
  std::vector<FlatTensor> tensors;      // in state_dict order
  int64_t count = 0;                    // the flat state's length (padding included)
  std::vector<std::string> optimizer_states;  // "exp_avg", "exp_avg_sq" | "momentum_buffer"
};

// One rank's part of a save.
struct Shard {
  CheckpointMeta meta;
  int64_t rank = 0, ranks = 1, begin = 0, end = 0;
  std::vector<float> model;  // the parameters [begin, end)
  std::vector<std::pair<std::string, std::vector<float>>> optimizer_state;  // by state name, [begin, end)
};

// What the manifest records of a written shard. Plain numbers, so that ranks can gather them.
struct ShardRecord {
  int64_t rank = 0, ranks = 0, begin = 0, end = 0;
  uint64_t bytes = 0, crc32 = 0;
};

std::string step_directory_name(int64_t step);                 // step-00000100
std::string shard_file_name(int64_t rank, int64_t ranks);      // shard-00001-of-00004.h5
constexpr const char* kManifestName = "manifest.json";

// Writes the shard into `step_dir` (created if missing) atomically; throws CheckpointError
// "cannot write checkpoint PATH: REASON" and leaves no temporary. `midway` runs between the model
// and the optimizer state (the test hooks' fault point).
ShardRecord write_shard(const std::string& step_dir, const Shard& shard, const std::function<void()>& midway = {});

// Publishes the step: the manifest, atomically, after every shard in `shards` (rank order).
void write_manifest(const std::string& step_dir, const CheckpointMeta& meta, const FlatLayout& layout,
                    const std::vector<ShardRecord>& shards);

// Verifies the manifest and every shard against it, then assembles the whole checkpoint. Throws
// CheckpointError naming the file at fault: "no manifest.json (the save did not finish)",
// "shard-00001-of-00004.h5 is missing", "shard-...: the file has N bytes, the manifest records M".
Checkpoint load_sharded_checkpoint(const std::string& step_dir);

}  // namespace trainctl

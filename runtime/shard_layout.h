// How the flat state (parameters, gradients, optimizer state: one layout) is split among the
// data-parallel ranks, for ZeRO-1 and for sharded checkpoints: contiguous ranges of whole
// alignment units (64 floats, 256 bytes, so that every shard starts aligned for vector loads and
// for NCCL), dealt so that no two ranks' shares differ by more than one unit; the last unit may be
// short, and a tensor may span two shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainctl {

constexpr int64_t kShardAlignment = 64;

struct ShardLayout {
  std::vector<int64_t> bounds;  // rank r holds [bounds[r], bounds[r + 1]); ranks + 1 entries
  int64_t begin(int rank) const { return bounds[static_cast<size_t>(rank)]; }
  int64_t end(int rank) const { return bounds[static_cast<size_t>(rank) + 1]; }
  int64_t count(int rank) const { return end(rank) - begin(rank); }
};

ShardLayout balanced_shards(int64_t count, int ranks);

}  // namespace trainctl

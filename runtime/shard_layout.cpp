// The data-parallel shards of the flat state: see shard_layout.h.
#include "shard_layout.h"

#include <algorithm>

namespace trainctl {

ShardLayout balanced_shards(int64_t count, int ranks) {
  const int64_t units = (count + kShardAlignment - 1) / kShardAlignment;
  ShardLayout layout{{0}};
  int64_t dealt = 0;
  for (int r = 0; r < ranks; ++r) {
    dealt += units / ranks + (r < units % ranks ? 1 : 0);
    layout.bounds.push_back(std::min(dealt * kShardAlignment, count));
  }
  return layout;
}

}  // namespace trainctl

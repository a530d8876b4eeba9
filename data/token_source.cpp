// Token shards behind the batch seam: see token_source.h.
#include "token_source.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "token_file.h"

namespace trainctl {

void require_one_window(const std::string& path, int64_t count, int64_t block_size) {
  if (count < block_size + 1)
    throw DataError(fmt::format("{}: {} tokens, fewer than model.block_size + 1 = {}", path, count, block_size + 1));
}

TokenSource::TokenSource(std::string pattern, int64_t block_size, int64_t vocab_size)
    : pattern_(std::move(pattern)), block_size_(block_size) {
  for (const std::string& path : token_file_paths(pattern_)) {
    Shard shard{path, MappedTokenFile(path, vocab_size), examples_};
    const int64_t count = shard.file.size();
    require_one_window(path, count, block_size);
    examples_ += (count - 1) / block_size;
    shards_.push_back(std::move(shard));
  }
  // The sampler draws int32 indices.
  if (examples_ > std::numeric_limits<int32_t>::max())
    throw DataError(fmt::format("{}: {} windows of block_size + 1 tokens, more than the {} a dataset may have",
                                pattern_, examples_, std::numeric_limits<int32_t>::max()));
}

std::pair<const TokenSource::Shard*, int64_t> TokenSource::window(int64_t example) const {
  // The last shard whose first window is at or before `example`.
  const auto shard = std::prev(std::upper_bound(shards_.begin(), shards_.end(), example,
                                                [](int64_t index, const Shard& s) { return index < s.first_example; }));
  return {&*shard, (example - shard->first_example) * block_size_};
}

void TokenSource::gather(const std::vector<int32_t>& indices, Batch& batch) const {
  const auto rows = static_cast<int64_t>(indices.size());
  int32_t* tokens = batch.ints("tokens", {rows, block_size_});
  int32_t* targets = batch.ints("targets", {rows, block_size_});
  for (int64_t row = 0; row < rows; ++row) {
    const auto [shard, first] = window(indices[static_cast<size_t>(row)]);
    shard->file.copy_tokens(first, block_size_, tokens + row * block_size_);
    shard->file.copy_tokens(first + 1, block_size_, targets + row * block_size_);
  }
  batch.examples = rows;
}

std::string TokenSource::describe() const { return pattern_; }

}  // namespace trainctl

// Token shards behind the batch seam, for a language model of context block_size = T. An
// example is a window of T + 1 tokens: its first T are the inputs ("tokens") and its last T
// the next-token targets ("targets"). Windows do not overlap and never cross a shard boundary:
// shard s of n_s tokens gives (n_s - 1) / T windows, window j starting at token j*T, and the
// global example indices count the shards' windows in the order of their sorted paths.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "batch.h"
#include "token_file.h"

namespace trainctl {

// Throws DataError when the shard at `path`, of `count` tokens, is shorter than one example.
void require_one_window(const std::string& path, int64_t count, int64_t block_size);

class TokenSource : public BatchSource {
 public:
  // Maps every shard `pattern` names, in either token file format (token_file.h's
  // MappedTokenFile: one copy per node, in the page cache) and checks it against the model:
  // tokens below vocab_size, at least block_size + 1 tokens per shard. Throws DataError.
  TokenSource(std::string pattern, int64_t block_size, int64_t vocab_size);

  int64_t examples() const override { return examples_; }
  // "tokens" and "targets", int32 [indices.size(), block_size].
  void gather(const std::vector<int32_t>& indices, Batch& batch) const override;
  std::string describe() const override;

 private:
  struct Shard {
    std::string path;
    MappedTokenFile file;
    int64_t first_example = 0;  // global index of its window 0
  };
  // The shard that holds `example`, and the window's first token in it.
  std::pair<const Shard*, int64_t> window(int64_t example) const;

  std::string pattern_;
  int64_t block_size_;
  std::vector<Shard> shards_;
  int64_t examples_ = 0;
};

}  // namespace trainctl

// llm.c's token file format, which its and nanoGPT-style tokenizer scripts write: a header of
// 256 little-endian int32 ([0] magic 20240520, [1] version 1, [2] token count, the rest zero),
// then `count` uint16 tokens. A dataset is one such file or a glob of shards.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "atomic_file.h"

namespace trainctl {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr int32_t kTokenFileVersion = 1;
constexpr int64_t kTokenFileHeaderInts = 256;

// The files `pattern` names, by glob(3), in byte order of their paths (the same on every rank
// whatever the locale). A pattern without wildcards names its one file. Throws DataError when
// nothing matches.
std::vector<std::string> token_file_paths(const std::string& pattern);

// Reads and checks one token file's header alone: magic, version, the file size against the
// header's count. Returns the count; throws DataError naming the file and the problem.
int64_t read_token_count(const std::string& path);

// Reads and checks one token file: its header as read_token_count does, and every token <
// vocab_size. Throws DataError naming the file and the problem.
std::vector<uint16_t> read_token_file(const std::string& path, int64_t vocab_size);

// One token file mapped read-only and checked as read_token_file checks it. Its pages are the
// file's own in the page cache, which every rank of a node that maps the file shares: a node
// holds a dataset once (FineWeb 10B's 20 GB), not once per rank.
class MappedTokenFile {
 public:
  MappedTokenFile(const std::string& path, int64_t vocab_size);
  ~MappedTokenFile();
  MappedTokenFile(MappedTokenFile&& other) noexcept;
  MappedTokenFile& operator=(MappedTokenFile&&) = delete;
  MappedTokenFile(const MappedTokenFile&) = delete;
  MappedTokenFile& operator=(const MappedTokenFile&) = delete;

  std::span<const uint16_t> tokens() const { return tokens_; }

 private:
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::span<const uint16_t> tokens_;
};

// Writes `tokens` with their header, atomically (atomic_file.h).
void write_token_file(const std::string& path, std::span<const uint16_t> tokens);

// Writes a token file as its tokens come, for more than memory holds: the header's count is
// filled in by finish(), which publishes the file atomically; a writer destroyed unfinished
// leaves no file (AtomicFileWriter).
class TokenFileWriter {
 public:
  explicit TokenFileWriter(const std::string& path);
  // Throws DataError when the count would pass the header's int32.
  void append(std::span<const uint16_t> tokens);
  int64_t count() const { return count_; }
  // Moves the last `count` tokens appended here to the end of `destination`, a block at a time:
  // a validation split, whose size is known only once every token is written.
  void move_last_to(int64_t count, TokenFileWriter& destination);
  void finish();

 private:
  AtomicFileWriter file_;
  int64_t count_ = 0;
};

}  // namespace trainctl

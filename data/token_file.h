// llm.c's token file formats, which its and nanoGPT-style tokenizer scripts write: a header of
// 256 little-endian int32 ([0] magic, [1] version, [2] token count, the rest zero), then `count`
// tokens. GPT-2's format (magic 20240520, version 1) holds uint16 tokens; Llama 3's (magic
// 20240801, version 7: llm.c's dev/data/data_common.py) holds uint32 tokens, for vocabularies of
// more than 65536 ids. A dataset is one such file or a glob of shards, in either format.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "atomic_file.h"

namespace trainctl {

enum class TokenFormat {
  kUint16,  // GPT-2's: magic 20240520, version 1
  kUint32,  // Llama 3's: magic 20240801, version 7
};

constexpr int64_t kTokenFileHeaderInts = 256;

// The format a vocabulary of `vocab_size` ids is written in: GPT-2's up to 65536 ids, Llama 3's above.
TokenFormat token_format_for(int64_t vocab_size);
int64_t bytes_per_token(TokenFormat format);
// "GPT-2's uint16 format" or "Llama 3's uint32 format", for messages.
const char* token_format_name(TokenFormat format);

// The files `pattern` names, by glob(3), in byte order of their paths (the same on every rank
// whatever the locale). A pattern without wildcards names its one file. Throws DataError when
// nothing matches.
std::vector<std::string> token_file_paths(const std::string& pattern);

struct TokenFileHeader {
  TokenFormat format;
  int64_t count;
};

// Reads and checks one token file's header alone: magic and version (a pair of either format),
// the file size against the header's count. Throws DataError naming the file and the problem.
TokenFileHeader read_token_header(const std::string& path);

// Reads and checks one token file of either format: its header as read_token_header does, and
// every token < vocab_size. Throws DataError naming the file and the problem.
std::vector<uint32_t> read_token_file(const std::string& path, int64_t vocab_size);

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

  TokenFormat format() const { return format_; }
  int64_t size() const { return count_; }
  // Tokens [first, first + count) as int32 into `out`: a whole file is never widened, which
  // would double its memory.
  void copy_tokens(int64_t first, int64_t count, int32_t* out) const;

 private:
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
  const char* tokens_ = nullptr;
  TokenFormat format_ = TokenFormat::kUint16;
  int64_t count_ = 0;
};

// Writes `tokens` with their header, atomically (atomic_file.h): uint16 tokens in GPT-2's format,
// uint32 tokens in Llama 3's.
void write_token_file(const std::string& path, std::span<const uint16_t> tokens);
void write_token_file(const std::string& path, std::span<const uint32_t> tokens);

// Writes a token file as its tokens come, for more than memory holds: the header's count is
// filled in by finish(), which publishes the file atomically; a writer destroyed unfinished
// leaves no file (AtomicFileWriter).
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, TokenFormat format);
  // Throws DataError when the count would pass the header's int32, or a token does not fit the
  // format (a uint32 token past 65535 in GPT-2's).
  void append(std::span<const uint32_t> tokens);
  void append(std::span<const uint16_t> tokens);
  int64_t count() const { return count_; }
  TokenFormat format() const { return format_; }
  const std::string& path() const { return file_.path(); }
  // Moves the last `count` tokens appended here to the end of `destination`, of the same format,
  // a block at a time: a validation split, whose size is known only once every token is written.
  void move_last_to(int64_t count, TokenFileWriter& destination);
  void finish();

 private:
  void append_bytes(std::string_view bytes, int64_t tokens);

  AtomicFileWriter file_;
  TokenFormat format_;
  int64_t count_ = 0;
};

}  // namespace trainctl

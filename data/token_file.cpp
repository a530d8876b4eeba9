// llm.c's token file format: see token_file.h.
#include "token_file.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "batch.h"

namespace trainctl {

// The header and the tokens are read and written as the host's own integers.
static_assert(std::endian::native == std::endian::little, "token files are little-endian");

namespace {

constexpr int64_t kHeaderBytes = kTokenFileHeaderInts * static_cast<int64_t>(sizeof(int32_t));

int64_t file_size_of(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) throw DataError(fmt::format("cannot read token file {}: {}", path, error.message()));
  return static_cast<int64_t>(size);
}

struct OpenTokenFile {
  std::ifstream in;  // at the first token
  int64_t count = 0;
};

OpenTokenFile open_token_file(const std::string& path) {
  const int64_t size = file_size_of(path);
  OpenTokenFile file{std::ifstream(path, std::ios::binary)};
  if (!file.in) throw DataError(fmt::format("cannot read token file {}: {}", path, std::strerror(errno)));
  if (size < kHeaderBytes)
    throw DataError(fmt::format("{}: {} bytes, shorter than the {}-byte header of a token file", path, size,
                                kHeaderBytes));
  std::array<int32_t, kTokenFileHeaderInts> header{};
  file.in.read(reinterpret_cast<char*>(header.data()), kHeaderBytes);
  if (header[0] != kTokenFileMagic)
    throw DataError(fmt::format("{}: not a token file: magic number {}, expected {}", path, header[0], kTokenFileMagic));
  if (header[1] != kTokenFileVersion)
    throw DataError(fmt::format("{}: token file version {}, expected {}", path, header[1], kTokenFileVersion));
  file.count = header[2];
  const int64_t expected_size = kHeaderBytes + file.count * static_cast<int64_t>(sizeof(uint16_t));
  if (file.count < 0 || size != expected_size)
    throw DataError(fmt::format("{}: file size {} bytes does not match the header's token count {} ({} bytes)", path,
                                size, file.count, expected_size));
  return file;
}

}  // namespace

std::vector<std::string> token_file_paths(const std::string& pattern) {
  if (pattern.find_first_of("*?[") == std::string::npos) return {pattern};
  glob_t found{};
  const int result = glob(pattern.c_str(), GLOB_NOSORT, nullptr, &found);
  std::vector<std::string> paths(found.gl_pathv, found.gl_pathv + found.gl_pathc);
  globfree(&found);
  if (result == GLOB_NOMATCH) throw DataError(fmt::format("no file matches {}", pattern));
  if (result != 0) throw DataError(fmt::format("cannot list the files that match {}", pattern));
  std::sort(paths.begin(), paths.end());
  return paths;
}

int64_t read_token_count(const std::string& path) { return open_token_file(path).count; }

namespace {
void require_below_vocab_size(const std::string& path, std::span<const uint16_t> tokens, int64_t vocab_size) {
  const auto too_large = std::find_if(tokens.begin(), tokens.end(), [&](uint16_t token) { return token >= vocab_size; });
  if (too_large != tokens.end())
    throw DataError(fmt::format("{}: token {} at position {} is not below model.vocab_size = {}", path, *too_large,
                                too_large - tokens.begin(), vocab_size));
}
}  // namespace

std::vector<uint16_t> read_token_file(const std::string& path, int64_t vocab_size) {
  OpenTokenFile file = open_token_file(path);
  std::vector<uint16_t> tokens(static_cast<size_t>(file.count));
  file.in.read(reinterpret_cast<char*>(tokens.data()), file.count * static_cast<int64_t>(sizeof(uint16_t)));
  if (!file.in) throw DataError(fmt::format("cannot read token file {}: {}", path, std::strerror(errno)));
  require_below_vocab_size(path, tokens, vocab_size);
  return tokens;
}

MappedTokenFile::MappedTokenFile(const std::string& path, int64_t vocab_size) {
  const int64_t count = read_token_count(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("cannot read token file {}: {}", path, std::strerror(errno)));
  mapped_bytes_ = static_cast<size_t>(kHeaderBytes + count * static_cast<int64_t>(sizeof(uint16_t)));
  void* mapping = ::mmap(nullptr, mapped_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);  // the mapping keeps the file
  if (mapping == MAP_FAILED)
    throw DataError(fmt::format("cannot map token file {}: {}", path, std::strerror(mmap_errno)));
  mapping_ = mapping;
  tokens_ = {reinterpret_cast<const uint16_t*>(static_cast<const char*>(mapping) + kHeaderBytes),
             static_cast<size_t>(count)};
  try {
    require_below_vocab_size(path, tokens_, vocab_size);
  } catch (...) {
    ::munmap(mapping_, mapped_bytes_);
    throw;
  }
}

MappedTokenFile::~MappedTokenFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_bytes_);
}

MappedTokenFile::MappedTokenFile(MappedTokenFile&& other) noexcept
    : mapping_(std::exchange(other.mapping_, nullptr)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
      tokens_(std::exchange(other.tokens_, {})) {}

void write_token_file(const std::string& path, std::span<const uint16_t> tokens) {
  TokenFileWriter writer(path);
  writer.append(tokens);
  writer.finish();
}

namespace {
std::string header_bytes(int64_t count) {
  std::array<int32_t, kTokenFileHeaderInts> header{};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<int32_t>(count);
  return std::string(reinterpret_cast<const char*>(header.data()), kHeaderBytes);
}

constexpr int64_t kTokenBytes = sizeof(uint16_t);
// What move_last_to holds at a time.
constexpr int64_t kMoveBlockTokens = 1 << 20;
}  // namespace

TokenFileWriter::TokenFileWriter(const std::string& path) : file_(path) { file_.append(header_bytes(0)); }

void TokenFileWriter::append(std::span<const uint16_t> tokens) {
  const int64_t total = count_ + static_cast<int64_t>(tokens.size());
  if (total > std::numeric_limits<int32_t>::max())
    throw DataError(fmt::format("{}: {} tokens do not fit one token file (its count is an int32)", file_.path(), total));
  file_.append(std::string_view(reinterpret_cast<const char*>(tokens.data()), tokens.size() * kTokenBytes));
  count_ = total;
}

void TokenFileWriter::move_last_to(int64_t count, TokenFileWriter& destination) {
  const int64_t kept = count_ - count;
  std::vector<uint16_t> block;
  for (int64_t first = kept; first < count_; first += kMoveBlockTokens) {
    block.resize(static_cast<size_t>(std::min(kMoveBlockTokens, count_ - first)));
    file_.read_at(kHeaderBytes + first * kTokenBytes,
                  std::span(reinterpret_cast<char*>(block.data()), block.size() * kTokenBytes));
    destination.append(block);
  }
  file_.truncate(kHeaderBytes + kept * kTokenBytes);
  count_ = kept;
}

void TokenFileWriter::finish() {
  file_.write_at(0, header_bytes(count_));
  file_.publish();
}

}  // namespace trainctl

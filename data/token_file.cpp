// llm.c's token file formats: see token_file.h.
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
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "batch.h"

namespace trainctl {

// The header and the tokens are read and written as the host's own integers.
static_assert(std::endian::native == std::endian::little, "token files are little-endian");

namespace {

constexpr int64_t kHeaderBytes = kTokenFileHeaderInts * static_cast<int64_t>(sizeof(int32_t));

struct FormatHeader {
  TokenFormat format;
  int32_t magic, version;
};
constexpr std::array<FormatHeader, 2> kFormats = {{{TokenFormat::kUint16, 20240520, 1},
                                                   {TokenFormat::kUint32, 20240801, 7}}};

const FormatHeader& header_of(TokenFormat format) { return kFormats[format == TokenFormat::kUint16 ? 0 : 1]; }

int64_t file_size_of(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) throw DataError(fmt::format("cannot read token file {}: {}", path, error.message()));
  return static_cast<int64_t>(size);
}

struct OpenTokenFile {
  std::ifstream in;  // at the first token
  TokenFileHeader header{};
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
  const auto known = std::find_if(kFormats.begin(), kFormats.end(),
                                  [&](const FormatHeader& format) { return format.magic == header[0]; });
  if (known == kFormats.end())
    throw DataError(fmt::format("{}: not a token file: magic number {}, expected {} ({}) or {} ({})", path, header[0],
                                kFormats[0].magic, token_format_name(kFormats[0].format), kFormats[1].magic,
                                token_format_name(kFormats[1].format)));
  if (header[1] != known->version)
    throw DataError(fmt::format("{}: token file version {}, expected {} ({})", path, header[1], known->version,
                                token_format_name(known->format)));
  file.header = {known->format, header[2]};
  const int64_t expected_size = kHeaderBytes + file.header.count * bytes_per_token(known->format);
  if (file.header.count < 0 || size != expected_size)
    throw DataError(fmt::format("{}: file size {} bytes does not match the header's token count {} ({} bytes)", path,
                                size, file.header.count, expected_size));
  return file;
}

// `count` tokens of `format` at `bytes`, each passed to `visit` as a uint32_t.
template <class Visit>
void for_each_token(const char* bytes, TokenFormat format, int64_t count, Visit visit) {
  if (format == TokenFormat::kUint16) {
    const auto* tokens = reinterpret_cast<const uint16_t*>(bytes);
    for (int64_t i = 0; i < count; ++i) visit(i, uint32_t{tokens[i]});
  } else {
    const auto* tokens = reinterpret_cast<const uint32_t*>(bytes);
    for (int64_t i = 0; i < count; ++i) visit(i, tokens[i]);
  }
}

void require_below_vocab_size(const std::string& path, const char* bytes, TokenFormat format, int64_t count,
                              int64_t vocab_size) {
  // The largest token first, in a loop the compiler vectorizes; the position only for the message.
  uint32_t largest = 0;
  for_each_token(bytes, format, count, [&](int64_t, uint32_t token) { largest = std::max(largest, token); });
  if (largest < vocab_size) return;
  int64_t position = -1;
  uint32_t too_large = 0;
  for_each_token(bytes, format, count, [&](int64_t i, uint32_t token) {
    if (position < 0 && token >= vocab_size) {
      position = i;
      too_large = token;
    }
  });
  throw DataError(fmt::format("{}: token {} at position {} is not below model.vocab_size = {}", path, too_large,
                              position, vocab_size));
}

}  // namespace

TokenFormat token_format_for(int64_t vocab_size) {
  return vocab_size <= int64_t{1} << 16 ? TokenFormat::kUint16 : TokenFormat::kUint32;
}

int64_t bytes_per_token(TokenFormat format) { return format == TokenFormat::kUint16 ? 2 : 4; }

const char* token_format_name(TokenFormat format) {
  return format == TokenFormat::kUint16 ? "GPT-2's uint16 format" : "Llama 3's uint32 format";
}

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

TokenFileHeader read_token_header(const std::string& path) { return open_token_file(path).header; }

std::vector<uint32_t> read_token_file(const std::string& path, int64_t vocab_size) {
  OpenTokenFile file = open_token_file(path);
  const auto [format, count] = file.header;
  std::string bytes(static_cast<size_t>(count * bytes_per_token(format)), '\0');
  file.in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file.in) throw DataError(fmt::format("cannot read token file {}: {}", path, std::strerror(errno)));
  require_below_vocab_size(path, bytes.data(), format, count, vocab_size);
  std::vector<uint32_t> tokens(static_cast<size_t>(count));
  for_each_token(bytes.data(), format, count, [&](int64_t i, uint32_t token) { tokens[static_cast<size_t>(i)] = token; });
  return tokens;
}

MappedTokenFile::MappedTokenFile(const std::string& path, int64_t vocab_size) {
  const TokenFileHeader header = read_token_header(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("cannot read token file {}: {}", path, std::strerror(errno)));
  mapped_bytes_ = static_cast<size_t>(kHeaderBytes + header.count * bytes_per_token(header.format));
  void* mapping = ::mmap(nullptr, mapped_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);  // the mapping keeps the file
  if (mapping == MAP_FAILED)
    throw DataError(fmt::format("cannot map token file {}: {}", path, std::strerror(mmap_errno)));
  mapping_ = mapping;
  tokens_ = static_cast<const char*>(mapping) + kHeaderBytes;
  format_ = header.format;
  count_ = header.count;
  try {
    require_below_vocab_size(path, tokens_, format_, count_, vocab_size);
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
      tokens_(std::exchange(other.tokens_, nullptr)),
      format_(other.format_),
      count_(std::exchange(other.count_, 0)) {}

void MappedTokenFile::copy_tokens(int64_t first, int64_t count, int32_t* out) const {
  for_each_token(tokens_ + first * bytes_per_token(format_), format_, count,
                 [out](int64_t i, uint32_t token) { out[i] = static_cast<int32_t>(token); });
}

void write_token_file(const std::string& path, std::span<const uint16_t> tokens) {
  TokenFileWriter writer(path, TokenFormat::kUint16);
  writer.append(tokens);
  writer.finish();
}

void write_token_file(const std::string& path, std::span<const uint32_t> tokens) {
  TokenFileWriter writer(path, TokenFormat::kUint32);
  writer.append(tokens);
  writer.finish();
}

namespace {
std::string header_bytes(TokenFormat format, int64_t count) {
  std::array<int32_t, kTokenFileHeaderInts> header{};
  header[0] = header_of(format).magic;
  header[1] = header_of(format).version;
  header[2] = static_cast<int32_t>(count);
  return std::string(reinterpret_cast<const char*>(header.data()), kHeaderBytes);
}

template <class Token>
std::string_view bytes_of(std::span<const Token> tokens) {
  return {reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(Token)};
}

// What move_last_to holds at a time.
constexpr int64_t kMoveBlockTokens = 1 << 20;
}  // namespace

TokenFileWriter::TokenFileWriter(const std::string& path, TokenFormat format) : file_(path), format_(format) {
  file_.append(header_bytes(format_, 0));
}

void TokenFileWriter::append_bytes(std::string_view bytes, int64_t tokens) {
  const int64_t total = count_ + tokens;
  if (total > std::numeric_limits<int32_t>::max())
    throw DataError(fmt::format("{}: {} tokens do not fit one token file (its count is an int32)", file_.path(), total));
  file_.append(bytes);
  count_ = total;
}

void TokenFileWriter::append(std::span<const uint32_t> tokens) {
  if (format_ == TokenFormat::kUint32) return append_bytes(bytes_of(tokens), static_cast<int64_t>(tokens.size()));
  std::vector<uint16_t> narrow(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] > std::numeric_limits<uint16_t>::max())
      throw DataError(fmt::format("{}: token {} does not fit {}", file_.path(), tokens[i], token_format_name(format_)));
    narrow[i] = static_cast<uint16_t>(tokens[i]);
  }
  append(narrow);
}

void TokenFileWriter::append(std::span<const uint16_t> tokens) {
  if (format_ == TokenFormat::kUint16) return append_bytes(bytes_of(tokens), static_cast<int64_t>(tokens.size()));
  const std::vector<uint32_t> wide(tokens.begin(), tokens.end());
  append(wide);
}

void TokenFileWriter::move_last_to(int64_t count, TokenFileWriter& destination) {
  if (destination.format_ != format_)
    throw std::logic_error(fmt::format("move_last_to: {} and {} have other formats", path(), destination.path()));
  const int64_t kept = count_ - count, token_bytes = bytes_per_token(format_);
  std::string block;
  for (int64_t first = kept; first < count_; first += kMoveBlockTokens) {
    const int64_t tokens = std::min(kMoveBlockTokens, count_ - first);
    block.resize(static_cast<size_t>(tokens * token_bytes));
    file_.read_at(kHeaderBytes + first * token_bytes, std::span(block.data(), block.size()));
    destination.append_bytes(block, tokens);
  }
  file_.truncate(kHeaderBytes + kept * token_bytes);
  count_ = kept;
}

void TokenFileWriter::finish() {
  file_.write_at(0, header_bytes(format_, count_));
  file_.publish();
}

}  // namespace trainctl

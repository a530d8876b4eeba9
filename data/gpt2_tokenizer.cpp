// GPT-2's byte-level BPE tokenizer: see gpt2_tokenizer.h.
#include "gpt2_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bad_input.h"
#include "json.h"

namespace trainctl {

namespace {

// GPT-2's pre-tokenizer (encoder.py in openai/gpt-2), matched at each position in turn. Anchored:
// one of its alternatives matches every character, so each match starts where the last ended.
constexpr const char* kPreTokenizerPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// A non-whitespace character followed by a whitespace one: first_split_point's cut is its end.
constexpr const char* kSplitPattern = R"(\S(?=\s))";
constexpr const char* kEndOfText = "<|endoftext|>";
// Token files hold uint16 ids.
constexpr int64_t kMaxVocabSize = int64_t{1} << 16;
// Each thread's cache of pre-tokens' tokens is emptied when it reaches this many, few enough for
// the CPU's caches to hold it: at 1 << 17 its lookups missed them, and text whose words seldom
// recur took 30% longer. Longer pre-tokens (whitespace runs, mostly) are not kept.
constexpr size_t kCacheEntries = size_t{1} << 14;
constexpr size_t kLongestCachedPiece = 256;

// Tokens and lines in messages, as JSON strings: control characters escaped (a NUL would end the
// message), bytes that are not UTF-8 replaced.
std::string json_quoted(std::string_view text) { return json_text(Json(std::string(text))); }

std::string not_utf8_message(std::string_view text, size_t offset) {
  return fmt::format("text is not UTF-8 at byte offset {} (byte 0x{:02x})", offset, static_cast<unsigned char>(text[offset]));
}

// GPT-2 writes each byte of a token as one printable character, so that vocab.json and
// merges.txt are text: the printable Latin-1 bytes stand for themselves, and the other 68 (the
// controls, the space, 0x7f to 0xa0 and the soft hyphen) for U+0100 onwards, in byte order.
struct ByteCharacters {
  std::array<char32_t, 256> of_byte{};
  std::array<int16_t, 256 + 68> byte_of{};  // -1: no byte

  ByteCharacters() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
      of_byte[byte] = printable ? static_cast<char32_t>(byte) : next++;
      byte_of[of_byte[byte]] = static_cast<int16_t>(byte);
    }
  }
};
const ByteCharacters kByteCharacters;

// The bytes a vocabulary entry stands for, or the first character that stands for no byte.
// `text` is UTF-8 (nlohmann-json checks it).
struct DecodedToken {
  std::string bytes;
  std::optional<char32_t> stray;
};

DecodedToken decode_token_text(std::string_view text) {
  DecodedToken token;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    char32_t character = length == 1 ? lead : lead & (0x7f >> length);
    for (size_t k = 1; k < length; ++k) character = (character << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
    i += length;
    const int16_t byte = character < kByteCharacters.byte_of.size() ? kByteCharacters.byte_of[character] : -1;
    if (byte < 0) {
      token.stray = character;
      return token;
    }
    token.bytes.push_back(static_cast<char>(byte));
  }
  return token;
}

// The UTF-8 of a character that stands for a byte (below U+0800).
std::string character_text(char32_t character) {
  if (character < 0x80) return std::string(1, static_cast<char>(character));
  return {static_cast<char>(0xc0 | (character >> 6)), static_cast<char>(0x80 | (character & 0x3f))};
}

class CompiledPattern {
 public:
  CompiledPattern(const char* pattern, uint32_t options) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | options, &error, &error_offset, nullptr);
    if (code_ == nullptr) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error, message.data(), message.size());
      throw std::logic_error(fmt::format("PCRE2 rejects {} at {}: {}", pattern, error_offset,
                                         reinterpret_cast<const char*>(message.data())));
    }
    // Where PCRE2 was built without JIT this fails and matching falls back to its interpreter.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~CompiledPattern() { pcre2_code_free(code_); }
  CompiledPattern(const CompiledPattern&) = delete;
  CompiledPattern& operator=(const CompiledPattern&) = delete;

  // The end of the first match at or after `offset`, or npos. `text` must be UTF-8.
  size_t match_end(std::string_view text, size_t offset, pcre2_match_data* match_data) const {
    const int result = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                                   PCRE2_NO_UTF_CHECK, match_data, nullptr);
    if (result == PCRE2_ERROR_NOMATCH) return std::string_view::npos;
    if (result < 0) throw std::runtime_error(fmt::format("PCRE2 match failed with error {}", result));
    return pcre2_get_ovector_pointer(match_data)[1];
  }

 private:
  pcre2_code* code_ = nullptr;
};

uint32_t pair_key(uint16_t left, uint16_t right) { return (static_cast<uint32_t>(left) << 16) | right; }

struct Merge {
  uint32_t rank;
  uint16_t result;
};

// The merges by pair_key, open-addressed: looked up for every pair of every pre-token that is not
// cached, where std::unordered_map's node per entry and division per hash were the slowest step.
class MergeTable {
 public:
  void reserve(size_t merges) {
    while ((size_t{1} << bits_) < 2 * merges) ++bits_;
    slots_.assign(size_t{1} << bits_, Slot{});
  }
  // A pair listed twice keeps its first, lower rank.
  void insert(uint32_t key, Merge merge) {
    Slot& slot = slots_[index_for(key)];
    if (slot.merge.rank == kEmpty) slot = {key, merge};
  }
  const Merge* find(uint32_t key) const {
    const Slot& slot = slots_[index_for(key)];
    return slot.merge.rank == kEmpty ? nullptr : &slot.merge;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint32_t key = 0;
    Merge merge{kEmpty, 0};
  };
  // The slot that holds `key`, or the empty one where it would go (Fibonacci hashing, linear probing).
  size_t index_for(uint32_t key) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = (key * uint64_t{0x9e3779b97f4a7c15}) >> (64 - bits_);; i = (i + 1) & mask)
      if (slots_[i].merge.rank == kEmpty || slots_[i].key == key) return i;
  }

  int bits_ = 1;
  std::vector<Slot> slots_;
};

// A symbol of a pre-token being merged, in a list linked by index; `next` is kMerged once the
// symbol has been merged into the one on its left.
struct Symbol {
  uint16_t token;
  int32_t previous, next;
};
constexpr int32_t kNone = -1, kMerged = -2;

// A pair that may merge: the symbol at `left` and the one after it.
struct Candidate {
  uint32_t rank;
  int32_t left;
  // The heap's order: the lowest rank first, the leftmost first among equal ranks.
  bool operator>(const Candidate& other) const { return std::pair(rank, left) > std::pair(other.rank, other.left); }
};

struct TokenRun {
  uint32_t first, count;
};

struct PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view piece) const { return std::hash<std::string_view>{}(piece); }
};

// What one encoding thread needs for itself: PCRE2's match data, the merge queue and the cache
// of pre-tokens already merged (most words recur).
struct Scratch {
  pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);
  std::unordered_map<std::string, TokenRun, PieceHash, std::equal_to<>> cache;
  std::vector<uint16_t> cached_tokens;
  std::vector<Symbol> symbols;
  std::vector<Candidate> candidates;

  Scratch() {
    if (match_data == nullptr) throw std::bad_alloc();
  }
  ~Scratch() { pcre2_match_data_free(match_data); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInput(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

nlohmann::json read_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file_text(path));
  } catch (const nlohmann::json::parse_error& error) {
    throw BadInput(fmt::format("{}: not JSON: {}", path, error.what()));
  }
}

// A merge as its file spells it, with its place there for messages.
struct MergeText {
  std::string left, right;
  std::string place;
};

}  // namespace

struct Gpt2Tokenizer::State {
  std::string directory;
  std::string content_hash;
  std::vector<std::string> token_bytes;  // by id
  std::array<uint16_t, 256> byte_token{};
  MergeTable merges;
  uint16_t end_of_text = 0;
  CompiledPattern pre_tokenizer{kPreTokenizerPattern, PCRE2_ANCHORED};
  CompiledPattern split_finder{kSplitPattern, 0};

  std::mutex idle_mutex;
  std::vector<std::unique_ptr<Scratch>> idle_scratch;

  // Reads the vocabulary `vocab` (token text -> id) of `vocab_file` and the merges in rank order.
  void build(const nlohmann::json& vocab, const std::string& vocab_file, const std::vector<MergeText>& merge_texts);
  void append_piece_tokens(std::string_view piece, Scratch& scratch, std::vector<uint16_t>& tokens) const;
  void merge_piece(std::string_view piece, Scratch& scratch) const;
};

namespace {

// A Scratch for the calling thread for as long as it lives, from the tokenizer's idle ones or new.
class ScratchLease {
 public:
  explicit ScratchLease(std::mutex& mutex, std::vector<std::unique_ptr<Scratch>>& idle) : mutex_(mutex), idle_(idle) {
    const std::lock_guard lock(mutex_);
    if (idle_.empty()) {
      scratch_ = std::make_unique<Scratch>();
    } else {
      scratch_ = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  ~ScratchLease() {
    const std::lock_guard lock(mutex_);
    idle_.push_back(std::move(scratch_));
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Scratch& operator*() const { return *scratch_; }

 private:
  std::mutex& mutex_;
  std::vector<std::unique_ptr<Scratch>>& idle_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace

size_t first_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    // ASCII, the bulk of most text, eight bytes at a time.
    if (uint64_t word = 0; i + sizeof(word) <= size) {
      std::memcpy(&word, bytes + i, sizeof(word));
      if ((word & 0x8080808080808080ULL) == 0) {
        i += sizeof(word);
        continue;
      }
    }
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The sequence's length and the range of its second byte, which rules out overlong forms,
    // surrogates and code points past U+10FFFF (RFC 3629's table).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead == 0xe0) low = 0xa0;
      if (lead == 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead == 0xf0) low = 0x90;
      if (lead == 0xf4) high = 0x8f;
    } else {
      return i;
    }
    if (i + length > size || bytes[i + 1] < low || bytes[i + 1] > high) return i;
    for (size_t k = 2; k < length; ++k)
      if ((bytes[i + k] & 0xc0) != 0x80) return i;
    i += length;
  }
  return std::string_view::npos;
}

void Gpt2Tokenizer::State::build(const nlohmann::json& vocab, const std::string& vocab_file,
                                 const std::vector<MergeText>& merge_texts) {
  if (!vocab.is_object()) throw BadInput(fmt::format("{}: the vocabulary is not an object of token: id", vocab_file));
  const auto size = static_cast<int64_t>(vocab.size());
  if (size > kMaxVocabSize)
    throw BadInput(fmt::format("{}: {} tokens, more than the {} ids a token file holds", vocab_file, size, kMaxVocabSize));
  std::vector<const std::string*> text_of_id(static_cast<size_t>(size), nullptr);
  std::unordered_map<std::string, uint16_t> id_of_text;
  token_bytes.resize(static_cast<size_t>(size));
  for (const auto& [text, id_value] : vocab.items()) {
    if (!id_value.is_number_integer())
      throw BadInput(fmt::format("{}: the id of token {} is not an integer", vocab_file, json_quoted(text)));
    const auto id = id_value.get<int64_t>();
    if (id < 0 || id >= size)
      throw BadInput(fmt::format("{}: token {} has id {}, outside 0 to {} ({} tokens)", vocab_file, json_quoted(text), id,
                                 size - 1, size));
    if (text_of_id[id] != nullptr)
      throw BadInput(fmt::format("{}: tokens {} and {} both have id {}", vocab_file, json_quoted(*text_of_id[id]),
                                 json_quoted(text), id));
    DecodedToken decoded = decode_token_text(text);
    if (decoded.stray)
      throw BadInput(fmt::format("{}: token {} (id {}) is not byte-level: U+{:04X} stands for no byte", vocab_file,
                                 json_quoted(text), id, static_cast<uint32_t>(*decoded.stray)));
    token_bytes[id] = std::move(decoded.bytes);
    text_of_id[id] = &id_of_text.emplace(text, static_cast<uint16_t>(id)).first->first;
  }
  for (int byte = 0; byte < 256; ++byte) {
    const std::string text = character_text(kByteCharacters.of_byte[byte]);
    const auto found = id_of_text.find(text);
    if (found == id_of_text.end())
      throw BadInput(fmt::format("{}: no token for byte 0x{:02x} ({})", vocab_file, byte, json_quoted(text)));
    byte_token[byte] = found->second;
  }
  const auto end = id_of_text.find(kEndOfText);
  if (end == id_of_text.end()) throw BadInput(fmt::format("{}: no {} token", vocab_file, kEndOfText));
  end_of_text = end->second;

  // The hash reads integers as little-endian bytes, the same on every host.
  uLong crc = crc32_z(0L, Z_NULL, 0);
  auto hash_integer = [&crc](uint32_t value, size_t bytes) {
    for (size_t k = 0; k < bytes; ++k) {
      const auto byte = static_cast<Bytef>(value >> (8 * k));
      crc = crc32_z(crc, &byte, 1);
    }
  };
  for (const std::string& bytes : token_bytes) {
    hash_integer(static_cast<uint32_t>(bytes.size()), 4);
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  }
  merges.reserve(merge_texts.size());
  for (size_t rank = 0; rank < merge_texts.size(); ++rank) {
    const MergeText& merge = merge_texts[rank];
    auto id_of = [&](const std::string& text, const char* what) {
      const auto found = id_of_text.find(text);
      if (found == id_of_text.end())
        throw BadInput(fmt::format("{}: the merge {} {} {}, which is not a token of {}", merge.place,
                                   json_quoted(merge.left + " " + merge.right), what, json_quoted(text), vocab_file));
      return found->second;
    };
    const uint16_t left = id_of(merge.left, "names");
    const uint16_t right = id_of(merge.right, "names");
    const uint16_t result = id_of(merge.left + merge.right, "makes");
    merges.insert(pair_key(left, right), Merge{static_cast<uint32_t>(rank), result});
    hash_integer(left, 2);
    hash_integer(right, 2);
  }
  content_hash = fmt::format("crc32:{:08x}", crc);
}

namespace {

// "left right": GPT-2's merges.txt line, and tokenizer.json's older form of a merge.
std::optional<std::pair<std::string, std::string>> split_merge(std::string_view line) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos)
    return std::nullopt;
  return std::pair(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
}

std::vector<MergeText> read_merges_txt(const std::string& path) {
  const std::string text = read_file_text(path);
  std::vector<MergeText> merges;
  int64_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    auto parts = split_merge(line);
    if (!parts) throw BadInput(fmt::format("{}:{}: {} is not two tokens separated by a space", path, line_number, json_quoted(line)));
    merges.push_back({std::move(parts->first), std::move(parts->second), fmt::format("{}:{}", path, line_number)});
  }
  return merges;
}

std::vector<MergeText> read_json_merges(const nlohmann::json& entries, const std::string& path) {
  if (!entries.is_array()) throw BadInput(fmt::format("{}: model.merges is not an array", path));
  std::vector<MergeText> merges;
  merges.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const nlohmann::json& entry = entries[i];
    std::string place = fmt::format("{}: model.merges[{}]", path, i);
    std::optional<std::pair<std::string, std::string>> parts;
    if (entry.is_string()) {
      parts = split_merge(entry.get<std::string>());
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
      parts = std::pair(entry[0].get<std::string>(), entry[1].get<std::string>());
    }
    if (!parts) throw BadInput(fmt::format("{} is neither \"left right\" nor [\"left\", \"right\"]", place));
    merges.push_back({std::move(parts->first), std::move(parts->second), std::move(place)});
  }
  return merges;
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& directory) {
  const std::filesystem::path folder(directory);
  const std::string vocab_path = (folder / "vocab.json").string(), merges_path = (folder / "merges.txt").string(),
                    json_path = (folder / "tokenizer.json").string();
  auto state = std::make_shared<State>();
  state->directory = directory;
  std::error_code ignored;
  if (std::filesystem::exists(vocab_path, ignored) && std::filesystem::exists(merges_path, ignored)) {
    state->build(read_json(vocab_path), vocab_path, read_merges_txt(merges_path));
  } else if (std::filesystem::exists(json_path, ignored)) {
    const nlohmann::json json = read_json(json_path);
    if (!json.is_object() || !json.contains("model") || !json["model"].is_object() || !json["model"].contains("vocab") ||
        !json["model"].contains("merges"))
      throw BadInput(fmt::format("{}: no model.vocab and model.merges", json_path));
    const nlohmann::json& model = json["model"];
    if (model.contains("type") && model["type"] != "BPE")
      throw BadInput(fmt::format("{}: model.type is {}, not \"BPE\"", json_path, model["type"].dump()));
    state->build(model["vocab"], json_path, read_json_merges(model["merges"], json_path));
  } else {
    throw BadInput(fmt::format("{}: not a tokenizer directory: it holds neither vocab.json and merges.txt nor tokenizer.json",
                               directory));
  }
  return Gpt2Tokenizer(std::move(state));
}

Gpt2Tokenizer::Gpt2Tokenizer(std::shared_ptr<State> state) : state_(std::move(state)) {}

void Gpt2Tokenizer::State::merge_piece(std::string_view piece, Scratch& scratch) const {
  std::vector<Symbol>& symbols = scratch.symbols;
  symbols.clear();
  const auto size = static_cast<int32_t>(piece.size());
  for (int32_t i = 0; i < size; ++i)
    symbols.push_back({byte_token[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < size ? i + 1 : kNone});
  std::vector<Candidate>& queue = scratch.candidates;
  queue.clear();
  auto consider = [&](int32_t left) {
    if (left == kNone || symbols[left].next == kNone) return;
    const Merge* merge = merges.find(pair_key(symbols[left].token, symbols[symbols[left].next].token));
    if (merge == nullptr) return;
    queue.push_back({merge->rank, left});
    std::push_heap(queue.begin(), queue.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < size; ++i) consider(i);
  // A heap rather than a scan for the lowest rank after each merge: pre-tokens can be long
  // (a run of a million spaces is one), and this keeps them O(n log n).
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), std::greater<>());
    const Candidate candidate = queue.back();
    queue.pop_back();
    Symbol& left = symbols[candidate.left];
    if (left.next < 0) continue;  // merged into its left neighbour, or the last symbol now
    Symbol& right = symbols[left.next];
    const Merge* merge = merges.find(pair_key(left.token, right.token));
    if (merge == nullptr || merge->rank != candidate.rank) continue;  // a neighbour merged since
    left.token = merge->result;
    const int32_t after = right.next;
    right.next = kMerged;
    left.next = after;
    if (after != kNone) symbols[after].previous = candidate.left;
    consider(left.previous);
    consider(candidate.left);
  }
}

void Gpt2Tokenizer::State::append_piece_tokens(std::string_view piece, Scratch& scratch,
                                               std::vector<uint16_t>& tokens) const {
  if (piece.size() == 1) {
    tokens.push_back(byte_token[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (const auto cached = scratch.cache.find(piece); cached != scratch.cache.end()) {
    const auto first = scratch.cached_tokens.begin() + cached->second.first;
    tokens.insert(tokens.end(), first, first + cached->second.count);
    return;
  }
  merge_piece(piece, scratch);
  const size_t start = tokens.size();
  for (int32_t i = 0; i != kNone; i = scratch.symbols[i].next) tokens.push_back(scratch.symbols[i].token);
  if (piece.size() > kLongestCachedPiece) return;
  if (scratch.cache.size() >= kCacheEntries) {
    scratch.cache.clear();
    scratch.cached_tokens.clear();
  }
  scratch.cache.emplace(piece, TokenRun{static_cast<uint32_t>(scratch.cached_tokens.size()),
                                        static_cast<uint32_t>(tokens.size() - start)});
  scratch.cached_tokens.insert(scratch.cached_tokens.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start),
                               tokens.end());
}

std::vector<uint16_t> Gpt2Tokenizer::encode(std::string_view utf8_text) const {
  if (const size_t bad = first_invalid_utf8(utf8_text); bad != std::string_view::npos)
    throw BadInput(not_utf8_message(utf8_text, bad));
  std::vector<uint16_t> tokens;
  tokens.reserve(utf8_text.size() / 3);
  const ScratchLease scratch(state_->idle_mutex, state_->idle_scratch);
  for (size_t offset = 0; offset < utf8_text.size();) {
    const size_t end = state_->pre_tokenizer.match_end(utf8_text, offset, (*scratch).match_data);
    if (end == std::string_view::npos || end <= offset)
      throw std::logic_error(fmt::format("GPT-2's pre-tokenizer matched nothing at byte {}", offset));
    state_->append_piece_tokens(utf8_text.substr(offset, end - offset), *scratch, tokens);
    offset = end;
  }
  return tokens;
}

std::string_view Gpt2Tokenizer::token_bytes(uint16_t token) const {
  if (token >= vocab_size())
    throw BadInput(fmt::format("token {} is not below the vocab_size {} of the tokenizer in {}", token, vocab_size(),
                               directory()));
  return state_->token_bytes[token];
}

std::string Gpt2Tokenizer::decode(std::span<const uint16_t> tokens) const {
  std::string text;
  for (const uint16_t token : tokens) text += token_bytes(token);
  return text;
}

int64_t Gpt2Tokenizer::vocab_size() const { return static_cast<int64_t>(state_->token_bytes.size()); }
uint16_t Gpt2Tokenizer::end_of_text() const { return state_->end_of_text; }
const std::string& Gpt2Tokenizer::content_hash() const { return state_->content_hash; }
const std::string& Gpt2Tokenizer::directory() const { return state_->directory; }

size_t Gpt2Tokenizer::first_split_point(std::string_view utf8_text) const {
  if (const size_t bad = first_invalid_utf8(utf8_text); bad != std::string_view::npos)
    throw BadInput(not_utf8_message(utf8_text, bad));
  const ScratchLease scratch(state_->idle_mutex, state_->idle_scratch);
  return state_->split_finder.match_end(utf8_text, 0, (*scratch).match_data);
}

}  // namespace trainctl

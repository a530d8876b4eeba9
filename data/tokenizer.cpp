// A BPE tokenizer as Hugging Face's tokenizers library runs it: see tokenizer.h.
#include "tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "bad_input.h"

namespace trainctl {

namespace {

// Each thread's cache of pieces' tokens is emptied when it reaches this many, few enough for the
// CPU's caches to hold it: at 1 << 17 its lookups missed them, and text whose words seldom recur
// took 30% longer. Longer pieces (whitespace runs, whole SentencePiece-style texts) are not kept.
constexpr size_t kCacheEntries = size_t{1} << 14;
constexpr size_t kLongestCachedPiece = 256;
// PCRE2's JIT stack per thread: its default 32 KiB, growing to this for long pieces.
constexpr size_t kJitStackBytes = size_t{8} << 20;

std::string not_utf8_message(std::string_view text, size_t offset) {
  return fmt::format("text is not UTF-8 at byte offset {} (byte 0x{:02x})", offset, static_cast<unsigned char>(text[offset]));
}

// One match: [start, end).
struct Match {
  size_t start, end;
};

class CompiledPattern {
 public:
  // Throws BadInput naming `where` for a pattern PCRE2 rejects.
  CompiledPattern(const std::string& pattern, const std::string& where) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &error_offset, nullptr);
    if (code_ == nullptr) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error, message.data(), message.size());
      throw BadInput(fmt::format("{}: PCRE2 cannot compile {} (at {}: {})", where, pattern, error_offset,
                                 reinterpret_cast<const char*>(message.data())));
    }
    // Where PCRE2 was built without JIT this fails and matching falls back to its interpreter.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~CompiledPattern() { pcre2_code_free(code_); }
  CompiledPattern(const CompiledPattern&) = delete;
  CompiledPattern& operator=(const CompiledPattern&) = delete;

  // The first match at or after `offset`, or none. `text` must be UTF-8.
  std::optional<Match> find(std::string_view text, size_t offset, pcre2_match_data* match_data,
                            pcre2_match_context* context) const {
    const int result = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                                   PCRE2_NO_UTF_CHECK, match_data, context);
    if (result == PCRE2_ERROR_NOMATCH) return std::nullopt;
    if (result < 0) throw std::runtime_error(fmt::format("PCRE2 match failed with error {}", result));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    return Match{ovector[0], ovector[1]};
  }

 private:
  pcre2_code* code_ = nullptr;
};

uint64_t pair_key(uint32_t left, uint32_t right) { return (static_cast<uint64_t>(left) << 32) | right; }

struct Merge {
  uint32_t rank;
  uint32_t result;
};

// The merges by pair_key, open-addressed: looked up for every pair of every piece that is not
// cached, where std::unordered_map's node per entry and division per hash were the slowest step.
class MergeTable {
 public:
  void reserve(size_t merges) {
    while ((size_t{1} << bits_) < 2 * merges) ++bits_;
    slots_.assign(size_t{1} << bits_, Slot{});
  }
  // A pair listed twice keeps its first, lower rank.
  void insert(uint64_t key, Merge merge) {
    Slot& slot = slots_[index_for(key)];
    if (slot.merge.rank == kEmpty) slot = {key, merge};
  }
  const Merge* find(uint64_t key) const {
    const Slot& slot = slots_[index_for(key)];
    return slot.merge.rank == kEmpty ? nullptr : &slot.merge;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t key = 0;
    Merge merge{kEmpty, 0};
  };
  // The slot that holds `key`, or the empty one where it would go (Fibonacci hashing, linear probing).
  size_t index_for(uint64_t key) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = (key * uint64_t{0x9e3779b97f4a7c15}) >> (64 - bits_);; i = (i + 1) & mask)
      if (slots_[i].merge.rank == kEmpty || slots_[i].key == key) return i;
  }

  int bits_ = 1;
  std::vector<Slot> slots_;
};

// A symbol of a piece being merged, in a list linked by index; `next` is kMerged once the symbol
// has been merged into the one on its left.
struct Symbol {
  uint32_t token;
  int32_t previous, next;
};
constexpr int32_t kNone = -1, kMerged = -2;

// A pair that may merge: the symbol at `left` and the one after it, while they still hold the
// tokens `pair` (left in the high half) they held when it was found.
struct Candidate {
  uint32_t rank;
  int32_t left;
  uint64_t pair;
  uint32_t result;
  // The heap's order: the lowest rank first, the leftmost first among equal ranks.
  bool operator>(const Candidate& other) const { return std::pair(rank, left) > std::pair(other.rank, other.left); }
};

struct TokenRun {
  uint32_t first, count;
};

// What one encoding thread needs for itself: PCRE2's match data and JIT stack, the merge queue
// and the cache of pieces already merged (most words recur).
struct Scratch {
  pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 << 10, kJitStackBytes, nullptr);
  TextMap<TokenRun> cache;
  std::vector<uint32_t> cached_tokens;
  std::vector<Symbol> symbols;
  std::vector<Candidate> candidates;

  Scratch() {
    if (match_data == nullptr || context == nullptr || jit_stack == nullptr) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~Scratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

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

// Calls on_gap for each run of `text` between `pattern`'s matches and on_match for each match,
// in order, empty ones left out.
template <class OnGap, class OnMatch>
void split_by(const CompiledPattern& pattern, std::string_view text, Scratch& scratch, OnGap on_gap, OnMatch on_match) {
  size_t offset = 0;
  for (size_t from = 0; from < text.size();) {
    const std::optional<Match> match = pattern.find(text, from, scratch.match_data, scratch.context);
    if (!match) break;
    if (match->end == match->start) {  // an empty match cuts nothing: search on from the next character
      from = match->start + utf8_sequence_length(static_cast<unsigned char>(text[match->start]));
      continue;
    }
    if (match->start > offset) on_gap(offset, text.substr(offset, match->start - offset));
    on_match(match->start, text.substr(match->start, match->end - match->start));
    offset = from = match->end;
  }
  if (offset < text.size()) on_gap(offset, text.substr(offset));
}

}  // namespace

// The file as read, and what encoding derives from it.
struct Tokenizer::State : TokenizerSpec {
  std::string content_hash;
  std::vector<bool> added, opens_document;  // by id: an added token; a post-processor token before a text
  std::unordered_map<char32_t, uint32_t> character_tokens;  // SentencePiece-style
  MergeTable merge_table;
  std::vector<std::unique_ptr<CompiledPattern>> stages;  // the pre-tokenizer's, in order
  // The added tokens as alternations, longest first (Hugging Face matches the leftmost longest):
  // those matched in the text as given, then those in the normalized text (the same text: a file
  // with a normalizer has none of the second kind that --special matches).
  std::vector<std::unique_ptr<CompiledPattern>> added_patterns;
  TextMap<uint32_t> added_ids;
  std::string added_unsupported;  // why --special cannot be honoured, or empty
  std::unique_ptr<CompiledPattern> cut_finder;
  bool cut_with_added_tokens = false;
  bool strips_leading_space = false;

  std::mutex idle_mutex;
  std::vector<std::unique_ptr<Scratch>> idle_scratch;

  void build();
  void derive_cut_finder();
  void encode_text(std::string_view text, EncodeOptions options, Scratch& scratch, std::vector<uint32_t>& tokens) const;
  void encode_run(std::string_view run, bool at_start, EncodeOptions options, Scratch& scratch,
                  std::vector<uint32_t>& tokens) const;
  void pre_tokenize(std::string_view text, size_t stage, Scratch& scratch, std::vector<uint32_t>& tokens) const;
  void append_piece_tokens(std::string_view piece, Scratch& scratch, std::vector<uint32_t>& tokens) const;
  void start_symbols(std::string_view piece, Scratch& scratch) const;
  void merge_symbols(Scratch& scratch) const;
};

void Tokenizer::State::build() {
  if (!byte_level)
    for (const auto& [text, id] : vocab)
      if (!text.empty() && utf8_sequence_length(static_cast<unsigned char>(text[0])) == text.size())
        character_tokens.emplace(utf8_code_point_at(text, 0), id);

  added.assign(token_bytes.size(), false);
  for (const AddedToken& token : added_tokens) {
    added[token.id] = true;
    added_ids.emplace(token.content, token.id);
    if (added_unsupported.empty() && !token.unsupported.empty())
      added_unsupported = fmt::format("{}: {}: --special does not match added tokens so", vocab_file, token.unsupported);
  }
  for (const bool normalized : {false, true}) {
    std::vector<std::string> contents;
    for (const AddedToken& token : added_tokens)
      if (token.normalized == normalized) contents.push_back(token.content);
    if (contents.empty()) continue;
    std::sort(contents.begin(), contents.end(),
              [](const std::string& a, const std::string& b) { return a.size() != b.size() ? a.size() > b.size() : a < b; });
    std::string alternation;
    for (const std::string& content : contents) {
      if (!alternation.empty()) alternation += '|';
      alternation += pcre2_literal(content);
    }
    added_patterns.push_back(std::make_unique<CompiledPattern>(alternation, vocab_file + ": added_tokens"));
  }
  opens_document.assign(token_bytes.size(), false);
  for (const uint32_t id : post_processor.before) opens_document[id] = true;

  if (metaspace && metaspace->split) {
    // A piece starts at each replacement (Hugging Face's MergedWithNext): "▁a▁▁b" is "▁a", "▁", "▁b".
    const std::string replacement = pcre2_literal(metaspace->replacement);
    stages.push_back(std::make_unique<CompiledPattern>(
        fmt::format("(?s){0}(?:(?!{0}).)*|(?:(?!{0}).)+", replacement), vocab_file + ": pre_tokenizer.split"));
  }
  for (const SplitStage& stage : splits)
    stages.push_back(std::make_unique<CompiledPattern>(stage.pattern, fmt::format("{}: {}", vocab_file, stage.field)));
  merge_table.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const MergeIds& merge = merges[rank];
    merge_table.insert(pair_key(merge.left, merge.right), Merge{static_cast<uint32_t>(rank), merge.result});
  }
  bool prepends = metaspace && metaspace->prepend != PrependScheme::kNever;
  for (const NormalizerStep& step : normalizer) prepends = prepends || step.kind == NormalizerStep::Kind::kPrepend;
  strips_leading_space = !byte_level && prepends;
  derive_cut_finder();

  // The hash reads integers as little-endian bytes, the same on every host; ids take two bytes
  // where they fit (the hashes of GPT-2's tokenizers stay what they were) and four past that.
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
  const size_t id_bytes = token_bytes.size() <= (size_t{1} << 16) ? 2 : 4;
  for (const MergeIds& merge : merges) {
    hash_integer(merge.left, id_bytes);
    hash_integer(merge.right, id_bytes);
  }
  content_hash = fmt::format("crc32:{:08x}", crc);
}

void Tokenizer::State::derive_cut_finder() {
  std::string pattern;
  bool prepends_every_run = false;
  if (!normalizer.empty() || metaspace) {
    // SentencePiece-style: spaces become one replacement character, and no regex cuts the text.
    if (byte_level || !splits.empty()) return;
    std::string replacement = metaspace ? metaspace->replacement : "";
    for (const NormalizerStep& step : normalizer) {
      if (step.kind != NormalizerStep::Kind::kReplace) continue;
      if (step.text != " " || !replacement.empty()) return;
      replacement = step.replacement;
    }
    for (const NormalizerStep& step : normalizer) {
      if (step.kind != NormalizerStep::Kind::kPrepend) continue;
      if (step.text != replacement) return;
      prepends_every_run = true;
    }
    if (replacement.empty() || utf8_sequence_length(static_cast<unsigned char>(replacement[0])) != replacement.size())
      return;
    // No token may hold the replacement after another character: a merge would cross the cut.
    for (const auto& [text, id] : vocab)
      for (size_t at = text.find(replacement, 1); at != std::string::npos; at = text.find(replacement, at + 1))
        if (at < replacement.size() || text.compare(at - replacement.size(), replacement.size(), replacement) != 0) return;
    pattern = fmt::format("[^ {}](?= )", replacement);
  } else {
    std::optional<CutRule> rule;
    for (const SplitStage& stage : splits) {
      if (stage.cut_rule == CutRule::kAnywhere) continue;
      if (stage.cut_rule == CutRule::kNone || (rule && *rule != stage.cut_rule)) return;
      rule = stage.cut_rule;
    }
    if (rule == CutRule::kBeforeWhitespace) pattern = fmt::format("[^{0}](?=[{0}])", kWhitespaceClass);
    if (rule == CutRule::kAfterNewline) pattern = fmt::format(R"([\r\n](?=[^{}]))", kWhitespaceClass);
    if (pattern.empty()) return;
  }
  cut_finder = std::make_unique<CompiledPattern>(pattern, "the cut pattern");
  // With added tokens matched, a cut inside one would split it, and a cut just after one where
  // the normalizer prepends to every run would leave the run after it without.
  cut_with_added_tokens = !prepends_every_run;
  const ScratchLease scratch(idle_mutex, idle_scratch);
  for (const auto& [content, id] : added_ids) {
    const std::optional<Match> cut = cut_finder->find(content, 0, (*scratch).match_data, (*scratch).context);
    if (cut && cut->end < content.size()) cut_with_added_tokens = false;
  }
}

void Tokenizer::State::encode_text(std::string_view text, EncodeOptions options, Scratch& scratch,
                                   std::vector<uint32_t>& tokens) const {
  if (!options.match_added_tokens || added_patterns.empty()) return encode_run(text, true, options, scratch, tokens);
  // Cuts `text` (at `offset` in the whole) by added_patterns[level] and the levels after it.
  std::function<void(std::string_view, size_t, size_t)> split_added = [&](std::string_view part, size_t offset,
                                                                          size_t level) {
    if (level == added_patterns.size()) return encode_run(part, offset == 0, options, scratch, tokens);
    split_by(
        *added_patterns[level], part, scratch,
        [&](size_t at, std::string_view gap) { split_added(gap, offset + at, level + 1); },
        [&](size_t, std::string_view token) { tokens.push_back(added_ids.find(token)->second); });
  };
  split_added(text, 0, 0);
}

// A run of text between added tokens: normalized, pre-tokenized and merged.
void Tokenizer::State::encode_run(std::string_view run, bool at_start, EncodeOptions options, Scratch& scratch,
                                  std::vector<uint32_t>& tokens) const {
  if (run.empty()) return;
  const bool continues = at_start && !options.starts_document;
  if (normalizer.empty() && !metaspace) return pre_tokenize(run, 0, scratch, tokens);
  std::string text(run);
  for (const NormalizerStep& step : normalizer) {
    if (step.kind == NormalizerStep::Kind::kReplace) {
      text = replace_all(text, step.text, step.replacement);
    } else if (!continues && !text.empty()) {
      text = step.text + text;
    }
  }
  if (metaspace) {
    text = replace_all(text, " ", metaspace->replacement);
    const bool prepend = metaspace->prepend == PrependScheme::kAlways
                             ? !continues
                             : metaspace->prepend == PrependScheme::kFirst && at_start && options.starts_document;
    if (prepend && !text.starts_with(metaspace->replacement)) text = metaspace->replacement + text;
  }
  pre_tokenize(text, 0, scratch, tokens);
}

void Tokenizer::State::pre_tokenize(std::string_view text, size_t stage, Scratch& scratch,
                                    std::vector<uint32_t>& tokens) const {
  if (stage == stages.size()) return append_piece_tokens(text, scratch, tokens);
  const auto next = [&](size_t, std::string_view piece) { pre_tokenize(piece, stage + 1, scratch, tokens); };
  split_by(*stages[stage], text, scratch, next, next);
}

// The piece's first symbols, before any merge: its bytes' tokens (byte-level), or its
// characters' tokens, each character the vocabulary lacks as its bytes' <0xNN> tokens
// (byte_fallback) or as the unknown token (one for a run of them, with fuse_unk): Hugging Face's
// BPE::merge_word, which appends an unknown token only at the next character the vocabulary has
// or at the end, after any byte tokens in between.
void Tokenizer::State::start_symbols(std::string_view piece, Scratch& scratch) const {
  std::vector<Symbol>& symbols = scratch.symbols;
  symbols.clear();
  auto add = [&symbols](uint32_t token) {
    const auto index = static_cast<int32_t>(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back({token, index - 1, kNone});
  };
  if (byte_level) {
    for (const char byte : piece) add(byte_tokens[static_cast<unsigned char>(byte)]);
    return;
  }
  bool unknown_pending = false;
  for (size_t at = 0; at < piece.size();) {
    const size_t length = utf8_sequence_length(static_cast<unsigned char>(piece[at]));
    const char32_t character = utf8_code_point_at(piece, at);
    if (const auto found = character_tokens.find(character); found != character_tokens.end()) {
      if (unknown_pending) add(unk);
      unknown_pending = false;
      add(found->second);
    } else if (byte_fallback && std::all_of(piece.begin() + static_cast<std::ptrdiff_t>(at),
                                            piece.begin() + static_cast<std::ptrdiff_t>(at + length), [&](char byte) {
                                              return byte_tokens[static_cast<unsigned char>(byte)] != kNoToken;
                                            })) {
      for (size_t k = at; k < at + length; ++k) add(byte_tokens[static_cast<unsigned char>(piece[k])]);
    } else if (unk != kNoToken) {
      if (unknown_pending && !fuse_unk) add(unk);
      unknown_pending = true;
    } else {
      throw BadInput(fmt::format("character U+{:04X} has no token, and {} has neither byte_fallback nor an unk_token "
                                 "for it", static_cast<uint32_t>(character), vocab_file));
    }
    at += length;
  }
  if (unknown_pending) add(unk);
}

void Tokenizer::State::merge_symbols(Scratch& scratch) const {
  std::vector<Symbol>& symbols = scratch.symbols;
  std::vector<Candidate>& queue = scratch.candidates;
  queue.clear();
  auto consider = [&](int32_t left) {
    if (left == kNone || symbols[left].next == kNone) return;
    const uint64_t pair = pair_key(symbols[left].token, symbols[symbols[left].next].token);
    const Merge* merge = merge_table.find(pair);
    if (merge == nullptr) return;
    queue.push_back({merge->rank, left, pair, merge->result});
    std::push_heap(queue.begin(), queue.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  // A heap rather than a scan for the lowest rank after each merge: pieces can be long (a run of
  // a million spaces is one, a SentencePiece-style text is one), and this keeps them O(n log n).
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), std::greater<>());
    const Candidate candidate = queue.back();
    queue.pop_back();
    Symbol& left = symbols[candidate.left];
    if (left.next < 0) continue;  // merged into its left neighbour, or the last symbol now
    Symbol& right = symbols[left.next];
    if (pair_key(left.token, right.token) != candidate.pair) continue;  // a neighbour merged since
    left.token = candidate.result;
    const int32_t after = right.next;
    right.next = kMerged;
    left.next = after;
    if (after != kNone) symbols[after].previous = candidate.left;
    consider(left.previous);
    consider(candidate.left);
  }
}

void Tokenizer::State::append_piece_tokens(std::string_view piece, Scratch& scratch,
                                           std::vector<uint32_t>& tokens) const {
  if (byte_level && piece.size() == 1) {
    tokens.push_back(byte_tokens[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (const auto cached = scratch.cache.find(piece); cached != scratch.cache.end()) {
    const auto first = scratch.cached_tokens.begin() + cached->second.first;
    tokens.insert(tokens.end(), first, first + cached->second.count);
    return;
  }
  const size_t start = tokens.size();
  // ignore_merges (Llama 3's): a piece that is itself a token is taken whole.
  if (const auto whole = ignore_merges ? vocab.find(piece) : vocab.end(); whole != vocab.end()) {
    tokens.push_back(whole->second);
  } else {
    start_symbols(piece, scratch);
    merge_symbols(scratch);
    if (!scratch.symbols.empty())
      for (int32_t i = 0; i != kNone; i = scratch.symbols[i].next) tokens.push_back(scratch.symbols[i].token);
  }
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

Tokenizer Tokenizer::load(const std::string& path) {
  auto state = std::make_shared<State>();
  static_cast<TokenizerSpec&>(*state) = read_tokenizer_spec(path);
  state->build();
  return Tokenizer(std::move(state));
}

Tokenizer::Tokenizer(std::shared_ptr<State> state) : state_(std::move(state)) {}

std::vector<uint32_t> Tokenizer::encode(std::string_view utf8_text, EncodeOptions options) const {
  if (const size_t bad = first_invalid_utf8(utf8_text); bad != std::string_view::npos)
    throw BadInput(not_utf8_message(utf8_text, bad));
  if (options.match_added_tokens && !state_->added_unsupported.empty()) throw BadInput(state_->added_unsupported);
  std::vector<uint32_t> tokens;
  tokens.reserve(utf8_text.size() / 3);
  const ScratchLease scratch(state_->idle_mutex, state_->idle_scratch);
  state_->encode_text(utf8_text, options, *scratch, tokens);
  return tokens;
}

std::string_view Tokenizer::token_bytes(uint32_t token) const {
  if (token >= vocab_size())
    throw BadInput(fmt::format("token {} is not below the vocab_size {} of the tokenizer {}", token, vocab_size(), path()));
  return state_->token_bytes[token];
}

std::string Tokenizer::decode(std::span<const uint32_t> tokens, bool starts_document) const {
  std::string text;
  bool document_start = starts_document;
  for (const uint32_t token : tokens) {
    std::string_view bytes = token_bytes(token);
    if (document_start && state_->strips_leading_space && !state_->added[token] && bytes.starts_with(' '))
      bytes.remove_prefix(1);
    text += bytes;
    document_start = state_->opens_document[token];
  }
  return text;
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(state_->token_bytes.size()); }
const DocumentTokens& Tokenizer::post_processor_tokens() const { return state_->post_processor; }
const DocumentTokens& Tokenizer::document_tokens() const { return state_->documents; }
const std::string& Tokenizer::content_hash() const { return state_->content_hash; }
const std::string& Tokenizer::path() const { return state_->path; }

size_t Tokenizer::first_split_point(std::string_view utf8_text, bool match_added_tokens) const {
  if (const size_t bad = first_invalid_utf8(utf8_text); bad != std::string_view::npos)
    throw BadInput(not_utf8_message(utf8_text, bad));
  if (!state_->cut_finder || (match_added_tokens && !state_->cut_with_added_tokens)) return std::string_view::npos;
  const ScratchLease scratch(state_->idle_mutex, state_->idle_scratch);
  const std::optional<Match> cut = state_->cut_finder->find(utf8_text, 0, (*scratch).match_data, (*scratch).context);
  return cut ? cut->end : std::string_view::npos;
}

}  // namespace trainctl

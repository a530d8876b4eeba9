// Reading a tokenizer as Hugging Face ships it into what tokenizer.h encodes with: GPT-2's
// vocab.json and merges.txt (as GPT2Tokenizer.save_pretrained writes them), or a tokenizer.json
// of one of the two BPE families the dense models people fine-tune use:
//  - byte-level BPE (GPT-2, Llama 3, SmolLM): a ByteLevel pre-tokenizer, its regex (GPT-2's) or
//    the Split regexes before it (Llama 3's), Digits, ignore_merges;
//  - SentencePiece-style BPE (Llama 2, Mistral 7B, TinyLlama): the Prepend and Replace normalizers
//    or a Metaspace pre-tokenizer, byte_fallback to <0xNN> tokens, unk_token and fuse_unk;
// both with their merges in either spelling, added tokens and a TemplateProcessing
// post-processor. Anything else (WordPiece, Unigram, NFC, a Split that is not Isolated, ...) is
// refused naming the field, never approximated.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trainctl {

// A normalizer step, applied to each run of text between added tokens, in turn.
struct NormalizerStep {
  enum class Kind {
    kPrepend,  // `text` before the run, when it is not empty
    kReplace,  // every `text` in the run by `replacement`
  };
  Kind kind;
  std::string text, replacement;
};

enum class PrependScheme {
  kNever,
  kFirst,   // before the run at the document's start only
  kAlways,  // before every run
};

// The Metaspace pre-tokenizer: spaces become `replacement`, which is prepended to a run that does
// not start with it (by `prepend`); with `split`, a piece starts at each replacement.
struct Metaspace {
  std::string replacement;
  PrependScheme prepend = PrependScheme::kAlways;
  bool split = true;
};

// Oniguruma's \s (Hugging Face's regex engine), as a PCRE2 class body: \t to \r, U+0085 and the
// separators. PCRE2's own \s differs: it takes U+180E too.
inline constexpr const char* kWhitespaceClass = R"(\t\n\x0b\f\r\x{85}\p{Z})";

// Where a pre-tokenizer regex lets a document be cut into parts that encode to the tokens of the
// whole (Tokenizer::first_split_point): proven for the regexes trainctl knows, none for others.
enum class CutRule {
  kAnywhere,          // a per-character split (Digits): every position
  kBeforeWhitespace,  // GPT-2's regex: between a non-whitespace character and a whitespace one
  kAfterNewline,      // Llama 3's and Qwen2's: after \r or \n, before a non-whitespace character
  kNone,
};

// A Split stage: each piece of the stage before is cut into the regex's matches and the text
// between them (Hugging Face's "Isolated" behaviour).
struct SplitStage {
  std::string pattern;  // PCRE2's spelling of the file's Oniguruma regex
  std::string field;    // where the file gives it, for messages
  CutRule cut_rule = CutRule::kNone;
};

struct AddedToken {
  uint32_t id;
  std::string content;
  bool normalized;  // matched in the normalized text, after the others in the text as given
  // Why --special cannot match it as Hugging Face would ("added_tokens[3].lstrip is true"), or empty.
  std::string unsupported;
};

// Tokens before and after each document.
struct DocumentTokens {
  std::vector<uint32_t> before, after;
};

struct MergeIds {
  uint32_t left, right, result;
};

inline constexpr uint32_t kNoToken = UINT32_MAX;

// Hashes std::string and std::string_view alike, so that a map keyed by std::string is searched
// with a view (no copy of the text per lookup).
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
template <class Value>
using TextMap = std::unordered_map<std::string, Value, TextHash, std::equal_to<>>;

struct TokenizerSpec {
  std::string path;        // as given: a tokenizer.json, or a directory
  std::string vocab_file;  // the file that holds the vocabulary, for messages
  bool byte_level = true;  // tokens are bytes, spelt in GPT-2's byte-to-character mapping
  std::vector<std::string> token_bytes;  // by id, added tokens included: what decoding gives
  // The model's vocabulary by what a piece of text is looked up as: its bytes (byte-level), its
  // text with the replacement for spaces (SentencePiece-style).
  TextMap<uint32_t> vocab;
  std::vector<MergeIds> merges;  // by rank
  // The token of each byte: byte-level, every byte's; SentencePiece-style with byte_fallback,
  // <0xNN>'s (kNoToken where the vocabulary lacks one).
  std::array<uint32_t, 256> byte_tokens{};
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  uint32_t unk = kNoToken;
  std::vector<NormalizerStep> normalizer;
  std::optional<Metaspace> metaspace;
  std::vector<SplitStage> splits;
  std::vector<AddedToken> added_tokens;
  DocumentTokens post_processor;  // TemplateProcessing's single; none without one
  DocumentTokens documents;       // what `data tokenize` puts around each document
};

// `text` with every `from` (not empty) replaced by `to`, left to right, as the Replace
// normalizer does.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

// PCRE2's spelling of a literal string.
std::string pcre2_literal(std::string_view text);

// Reads `path`: a tokenizer.json (any name), or a directory holding vocab.json and merges.txt
// (which win) or tokenizer.json. Throws BadInput naming the file and the field at fault.
TokenizerSpec read_tokenizer_spec(const std::string& path);

}  // namespace trainctl

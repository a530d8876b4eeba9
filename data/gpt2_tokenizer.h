// GPT-2's byte-level BPE tokenizer, read from a Hugging Face tokenizer directory: vocab.json and
// merges.txt (as GPT2Tokenizer.save_pretrained writes them), or tokenizer.json alone. Text is
// cut into pre-tokens by GPT-2's regex (PCRE2, Unicode properties, JIT-compiled), each
// pre-token's bytes are merged pair by pair, lowest merge rank first, and the result is GPT-2's
// token ids: the same ids as OpenAI's encoder and tiktoken's "gpt2" encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl {

// Where `text` stops being UTF-8 (RFC 3629: no overlong forms, surrogates or code points past
// U+10FFFF): the offset of the first byte that starts no valid sequence, or npos.
size_t first_invalid_utf8(std::string_view text);

// Immutable once loaded, and cheap to copy (copies share the vocabulary); every member may be
// called from several threads at once.
class Gpt2Tokenizer {
 public:
  // Throws BadInput (common/bad_input.h) naming the file at fault.
  static Gpt2Tokenizer load(const std::string& directory);

  // One document's tokens, without <|endoftext|> (text that spells it is encoded as text).
  // Throws BadInput for text that is not UTF-8, with the offset of the first bad byte.
  std::vector<uint16_t> encode(std::string_view utf8_text) const;
  // The tokens' bytes, concatenated; throws BadInput for a token >= vocab_size().
  std::string decode(std::span<const uint16_t> tokens) const;
  // One token's bytes (part of a UTF-8 character, possibly), for streaming output.
  std::string_view token_bytes(uint16_t token) const;

  int64_t vocab_size() const;  // 50257 for GPT-2
  uint16_t end_of_text() const;  // <|endoftext|>: 50256 for GPT-2
  // "crc32:xxxxxxxx" of the tokens' bytes in id order and the merges in rank order: the same
  // for vocab.json + merges.txt and the tokenizer.json that holds the same vocabulary.
  const std::string& content_hash() const;
  const std::string& directory() const;

  // The first position p > 0 where utf8_text[p - 1] is not whitespace and utf8_text[p] is (as
  // the regex's \s sees them), or npos: where a stream may be cut into chunks. No pre-token holds
  // a non-whitespace character followed by a whitespace one, so p is a pre-token boundary; the
  // pre-tokens before p depend on the characters before p alone (a whitespace character ends a
  // run of others as the end of the text does), and those after p on the characters from p on
  // (the regex looks behind nothing). So any text that holds utf8_text encodes, cut at p, to the
  // tokens of the whole. (A cut after a newline is not always one: "a  \nb" splits as "a",
  // "  ", "\n", "b", but "a  \n" alone as "a", "  \n".) Throws BadInput for text that is not UTF-8.
  size_t first_split_point(std::string_view utf8_text) const;

 private:
  struct State;
  explicit Gpt2Tokenizer(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace trainctl

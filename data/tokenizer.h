// A BPE tokenizer as Hugging Face's tokenizers library runs it, for the files tokenizer_files.h
// reads (GPT-2's, Llama 3's, Llama 2's, ...): the text split at added tokens (where asked for),
// normalized, cut into pieces by the pre-tokenizer's regexes (PCRE2, Unicode properties,
// JIT-compiled), and each piece's symbols (its bytes, or its characters with byte fallback)
// merged pair by pair, lowest merge rank first, leftmost first among equals. The ids are
// `transformers`' for the same file: for GPT-2's, OpenAI's and tiktoken's "gpt2" encoding's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_files.h"
#include "utf8.h"

namespace trainctl {

// How a text is encoded.
struct EncodeOptions {
  // False for a text that continues a document cut at a split point (first_split_point): the
  // normalizer's or Metaspace's prepended text is the document's start only.
  bool starts_document = true;
  // The file's added tokens (<|begin_of_text|>, <s>, ...) where the text spells them; otherwise
  // text that spells one is text, as in llm.c's encode_ordinary. Throws BadInput where the file
  // gives an added token options trainctl does not match as Hugging Face does (lstrip, ...).
  bool match_added_tokens = false;
};

// Immutable once loaded, and cheap to copy (copies share the vocabulary); every member may be
// called from several threads at once.
class Tokenizer {
 public:
  // A tokenizer.json, or a directory with vocab.json and merges.txt, or tokenizer.json
  // (tokenizer_files.h). Throws BadInput naming the file and the field at fault.
  static Tokenizer load(const std::string& path);

  // One text's tokens, without the tokens around a document (document_tokens()). Throws
  // BadInput for text that is not UTF-8, with the offset of the first bad byte.
  std::vector<uint32_t> encode(std::string_view utf8_text, EncodeOptions options = {}) const;
  // The tokens' bytes, concatenated, but for the space the normalizer put at a document's start
  // (SentencePiece-style), which is dropped after the post-processor's tokens before a document
  // and at the start where `starts_document`. Throws BadInput for a token >= vocab_size().
  std::string decode(std::span<const uint32_t> tokens, bool starts_document = true) const;
  // One token's bytes (part of a UTF-8 character, possibly), for streaming output.
  std::string_view token_bytes(uint32_t token) const;

  int64_t vocab_size() const;
  // What the file's post-processor (TemplateProcessing) puts around a text: Llama 3's
  // <|begin_of_text|> before it; none without one.
  const DocumentTokens& post_processor_tokens() const;
  // What `data tokenize` puts around each document: the post-processor's; for a file that
  // declares none, <|endoftext|> before it where the vocabulary has it (GPT-2's, as llm.c writes
  // its data).
  const DocumentTokens& document_tokens() const;
  // "crc32:xxxxxxxx" of the tokens' bytes in id order and the merges in rank order: the same
  // for vocab.json + merges.txt and the tokenizer.json that holds the same vocabulary.
  const std::string& content_hash() const;
  const std::string& path() const;

  // The first position p > 0 where utf8_text may be cut so that its parts, encoded one after
  // the other (the second with starts_document false), give the tokens of the whole, in any
  // text that holds utf8_text; npos where there is none in utf8_text, or none is known for this
  // tokenizer's pre-tokenizer (its documents are then encoded whole). The rules, proven for the
  // regexes trainctl knows (CutRule): GPT-2's, between a non-whitespace character and a
  // whitespace one (no pre-token holds that pair; those before depend on the characters before
  // alone, those after on the characters after: the regex looks behind nothing); Llama 3's,
  // after \r or \n before a non-whitespace character; SentencePiece-style without regexes,
  // before a space that follows neither a space nor the space's replacement, where no token
  // holds the replacement after another character (no merge crosses it). With
  // match_added_tokens, none where an added token holds such a position. Throws BadInput for text
  // that is not UTF-8.
  size_t first_split_point(std::string_view utf8_text, bool match_added_tokens) const;

 private:
  struct State;
  explicit Tokenizer(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace trainctl

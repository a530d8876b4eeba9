// UTF-8 as RFC 3629 defines it (no overlong forms, surrogates or code points past U+10FFFF): the
// check every tokenizer input passes, and the few conversions the tokenizers need.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace trainctl {

// Where `text` stops being UTF-8: the offset of the first byte that starts no valid sequence, or npos.
size_t first_invalid_utf8(std::string_view text);

// The length of the sequence whose first byte is `lead`, in valid UTF-8.
inline size_t utf8_sequence_length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4; }

// The code point whose sequence starts at text[offset], in valid UTF-8.
char32_t utf8_code_point_at(std::string_view text, size_t offset);

std::string utf8_of(char32_t code_point);

}  // namespace trainctl

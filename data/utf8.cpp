// UTF-8: see utf8.h.
#include "utf8.h"

#include <cstdint>
#include <cstring>

namespace trainctl {

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

char32_t utf8_code_point_at(std::string_view text, size_t offset) {
  const auto lead = static_cast<unsigned char>(text[offset]);
  const size_t length = utf8_sequence_length(lead);
  char32_t code_point = length == 1 ? lead : lead & (0x7f >> length);
  for (size_t k = 1; k < length; ++k) code_point = (code_point << 6) | (static_cast<unsigned char>(text[offset + k]) & 0x3f);
  return code_point;
}

std::string utf8_of(char32_t code_point) {
  if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
  if (code_point < 0x800)
    return {static_cast<char>(0xc0 | (code_point >> 6)), static_cast<char>(0x80 | (code_point & 0x3f))};
  if (code_point < 0x10000)
    return {static_cast<char>(0xe0 | (code_point >> 12)), static_cast<char>(0x80 | ((code_point >> 6) & 0x3f)),
            static_cast<char>(0x80 | (code_point & 0x3f))};
  return {static_cast<char>(0xf0 | (code_point >> 18)), static_cast<char>(0x80 | ((code_point >> 12) & 0x3f)),
          static_cast<char>(0x80 | ((code_point >> 6) & 0x3f)), static_cast<char>(0x80 | (code_point & 0x3f))};
}

}  // namespace trainctl

#include "unicode.h"

#include <algorithm>
#include <array>

#include "rne/base/utf8.h"

namespace rne::tokenizer::unicode {

namespace {

// Property bits used by the generated table.
constexpr uint8_t kLetter = 1, kNumber = 2, kWhitespace = 4, kWord = 8;

struct Range {
  uint32_t first;
  uint32_t last;
  uint8_t properties;
};

constexpr Range kRanges[] = {
#include "unicode_tables.inc"
};

uint8_t lookup(uint32_t cp) {
  const auto* it = std::upper_bound(std::begin(kRanges), std::end(kRanges), cp,
                                    [](uint32_t c, const Range& r) { return c < r.first; });
  if (it == std::begin(kRanges)) return 0;
  --it;
  return cp <= it->last ? it->properties : 0;
}

std::array<uint8_t, 128> make_ascii_table() {
  std::array<uint8_t, 128> table{};
  for (uint32_t cp = 0; cp < 128; ++cp) table[cp] = lookup(cp);
  return table;
}

const std::array<uint8_t, 128> kAscii = make_ascii_table();

uint8_t properties(uint32_t cp) { return cp < 128 ? kAscii[cp] : lookup(cp); }

}  // namespace

CharClass classify(uint32_t cp) {
  const uint8_t p = properties(cp);
  if (p & kLetter) return CharClass::kLetter;
  if (p & kNumber) return CharClass::kNumber;
  if (p & kWhitespace) return CharClass::kWhitespace;
  return CharClass::kOther;
}

bool is_word_char(uint32_t cp) { return (properties(cp) & kWord) != 0; }

size_t valid_sequence_length(std::string_view s, size_t pos) {
  size_t expected = 0;
  const size_t n = base::utf8::valid_prefix_length(s, pos, expected);
  return n == expected ? n : 0;
}

size_t decode_utf8(std::string_view s, size_t pos, uint32_t& cp) {
  const size_t n = valid_sequence_length(s, pos);
  const auto lead = static_cast<unsigned char>(s[pos]);
  switch (n) {
    case 1: cp = lead; return 1;
    case 2: cp = ((lead & 0x1Fu) << 6) | (s[pos + 1] & 0x3F); return 2;
    case 3:
      cp = ((lead & 0x0Fu) << 12) | ((s[pos + 1] & 0x3Fu) << 6) | (s[pos + 2] & 0x3F);
      return 3;
    case 4:
      cp = ((lead & 0x07u) << 18) | ((s[pos + 1] & 0x3Fu) << 12) | ((s[pos + 2] & 0x3Fu) << 6) |
           (s[pos + 3] & 0x3F);
      return 4;
    default: cp = 0xFFFD; return 1;
  }
}

bool is_valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = valid_sequence_length(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string to_valid_utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t expected = 0;
    const size_t n = base::utf8::valid_prefix_length(s, pos, expected);
    if (n != 0 && n == expected) {
      out.append(s.data() + pos, n);
      pos += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD replaces the whole invalid prefix
      pos += n == 0 ? 1 : n;
    }
  }
  return out;
}

}  // namespace rne::tokenizer::unicode

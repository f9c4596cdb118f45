#include "unicode.h"

#include <algorithm>
#include <array>

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

// Allowed range of the second byte for each lead byte (Unicode Table 3-7); later continuation
// bytes are always 0x80..0xBF.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

size_t expected_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation byte or never-valid lead
}

// Number of bytes of a (possibly incomplete) valid prefix at pos; equals the expected length
// when the sequence is complete. Returns 0 for a byte that cannot start a sequence.
size_t valid_prefix_length(std::string_view s, size_t pos, size_t& expected) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  expected = expected_length(lead);
  if (expected <= 1) return expected;
  size_t n = 1;
  while (n < expected && pos + n < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos + n]);
    const bool ok = n == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

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
  const size_t n = valid_prefix_length(s, pos, expected);
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
    const size_t n = valid_prefix_length(s, pos, expected);
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

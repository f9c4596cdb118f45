// UTF-8 validity (Unicode Table 3-7), the one statement of it the libraries share: the
// tokenizer's checks and lossy repair, the runner's streamed text and the JSON grammar's
// string states.
#pragma once

#include <cstddef>
#include <string_view>

namespace rne::base::utf8 {

// Length of the sequence a lead byte announces (1 for ASCII), or 0 for a byte that cannot start
// one: a continuation byte, an overlong lead (C0, C1) or one beyond U+10FFFF (F5..FF).
inline size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The range [lo, hi] of the byte after a multi-byte `lead` (no overlongs, surrogates or code
// points above U+10FFFF); every later continuation byte is 0x80..0xBF.
struct ByteRange {
  unsigned char lo;
  unsigned char hi;
};
inline ByteRange second_byte_range(unsigned char lead) {
  switch (lead) {
    case 0xE0: return {0xA0, 0xBF};
    case 0xED: return {0x80, 0x9F};
    case 0xF0: return {0x90, 0xBF};
    case 0xF4: return {0x80, 0x8F};
    default: return {0x80, 0xBF};
  }
}

// Bytes of the valid (possibly unfinished) prefix of the sequence at s[pos], with `expected`
// set to the length its lead announces: equal when the sequence is whole; 0 for a byte that
// cannot start one; less where a byte breaks it or `s` ends first.
inline size_t valid_prefix_length(std::string_view s, size_t pos, size_t& expected) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  expected = sequence_length(lead);
  if (expected <= 1) return expected;
  size_t n = 1;
  for (; n < expected && pos + n < s.size(); ++n) {
    const auto b = static_cast<unsigned char>(s[pos + n]);
    const ByteRange range = n == 1 ? second_byte_range(lead) : ByteRange{0x80, 0xBF};
    if (b < range.lo || b > range.hi) break;
  }
  return n;
}

}  // namespace rne::base::utf8

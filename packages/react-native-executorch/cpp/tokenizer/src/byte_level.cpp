#include "byte_level.h"

#include <array>

#include "unicode.h"

namespace rne::tokenizer::byte_level {

namespace {

using unicode::CharClass;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// are shifted to U+0100.. in byte order so every token is printable text.
struct ByteMap {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 0x180> cp_to_byte;  // stand-ins are all below U+0180; -1 = none

  ByteMap() {
    cp_to_byte.fill(-1);
    uint32_t shifted = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : 0x100 + shifted++;
      unicode::append_utf8(cp, byte_to_utf8[b]);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

struct Char {
  size_t offset;
  CharClass cls;
  uint32_t cp;
};

}  // namespace

void encode_bytes(std::string_view bytes, std::string& out) {
  const ByteMap& map = byte_map();
  for (const char c : bytes) out += map.byte_to_utf8[static_cast<unsigned char>(c)];
}

bool decode_token(std::string_view token, std::string& out) {
  const ByteMap& map = byte_map();
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    uint32_t cp = 0;
    pos += unicode::decode_utf8(token, pos, cp);
    if (cp >= map.cp_to_byte.size() || map.cp_to_byte[cp] < 0) return false;
    bytes += static_cast<char>(map.cp_to_byte[cp]);
  }
  out += bytes;
  return true;
}

void split_gpt2(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp = 0;
    const size_t n = unicode::decode_utf8(text, pos, cp);
    chars.push_back({pos, unicode::classify(cp), cp});
    pos += n;
  }
  const size_t count = chars.size();
  auto offset = [&](size_t i) { return i < count ? chars[i].offset : text.size(); };
  auto cls = [&](size_t i) { return chars[i].cls; };

  size_t i = 0;
  while (i < count) {
    size_t end = i;  // the match is chars [i, end)

    // 's 't 're 've 'm 'll 'd (ASCII, case-sensitive, as in GPT-2's pattern).
    if (chars[i].cp == '\'' && i + 1 < count) {
      const uint32_t a = chars[i + 1].cp;
      const uint32_t b = i + 2 < count ? chars[i + 2].cp : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') end = i + 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) end = i + 3;
    }
    if (end == i) {
      // ` ?X+` for X in {letters, numbers, other-non-space}: an optional single space prefix.
      const size_t body = (chars[i].cp == ' ' && i + 1 < count && cls(i + 1) != CharClass::kWhitespace)
                              ? i + 1
                              : i;
      if (cls(body) != CharClass::kWhitespace) {
        const CharClass run = cls(body);
        end = body + 1;
        while (end < count && cls(end) == run) ++end;
      } else {
        // Whitespace run: `\s+(?!\S)` leaves the last space for the next word when a
        // non-space follows; a single space before a non-space falls to `\s+`.
        size_t run_end = i + 1;
        while (run_end < count && cls(run_end) == CharClass::kWhitespace) ++run_end;
        if (run_end == count || run_end - i == 1) end = run_end;
        else end = run_end - 1;
      }
    }
    out.emplace_back(offset(i), offset(end));
    i = end;
  }
}

}  // namespace rne::tokenizer::byte_level

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "byte_level.h"
#include "unicode.h"

namespace unicode = rne::tokenizer::unicode;
namespace byte_level = rne::tokenizer::byte_level;
using unicode::CharClass;

TEST(Unicode, ClassifiesLettersNumbersAndWhitespace) {
  EXPECT_EQ(unicode::classify('a'), CharClass::kLetter);
  EXPECT_EQ(unicode::classify(0xE9), CharClass::kLetter);     // é
  EXPECT_EQ(unicode::classify(0x65E5), CharClass::kLetter);   // 日
  EXPECT_EQ(unicode::classify(0x02B0), CharClass::kLetter);   // modifier letter (Lm)
  EXPECT_EQ(unicode::classify('7'), CharClass::kNumber);
  EXPECT_EQ(unicode::classify(0x0663), CharClass::kNumber);   // Arabic-Indic three (Nd)
  EXPECT_EQ(unicode::classify(0x216B), CharClass::kNumber);   // Roman numeral twelve (Nl)
  EXPECT_EQ(unicode::classify(0x00BD), CharClass::kNumber);   // ½ (No)
  EXPECT_EQ(unicode::classify(' '), CharClass::kWhitespace);
  EXPECT_EQ(unicode::classify('\n'), CharClass::kWhitespace);
  EXPECT_EQ(unicode::classify(0x85), CharClass::kWhitespace);
  EXPECT_EQ(unicode::classify(0x3000), CharClass::kWhitespace);
  EXPECT_EQ(unicode::classify(0x2028), CharClass::kWhitespace);
  EXPECT_EQ(unicode::classify('!'), CharClass::kOther);
  EXPECT_EQ(unicode::classify(0x0301), CharClass::kOther);    // combining mark (Mn)
  EXPECT_EQ(unicode::classify(0x200B), CharClass::kOther);    // zero width space is not White_Space
  EXPECT_EQ(unicode::classify(0x1F600), CharClass::kOther);   // 😀
  EXPECT_EQ(unicode::classify(0x10FFFF), CharClass::kOther);
  // Unicode 16.0 (what HF tokenizers uses): Ol Onal letter O is new in 16.0; U+11DB0 is not
  // assigned in 16.0.
  EXPECT_EQ(unicode::classify(0x1E5D0), CharClass::kLetter);
  EXPECT_EQ(unicode::classify(0x11DB0), CharClass::kOther);
}

TEST(Unicode, WordCharactersAreRegexW) {
  for (const uint32_t cp : {uint32_t{'a'}, uint32_t{'Z'}, uint32_t{'5'}, uint32_t{'_'},
                            uint32_t{0x0301} /* Mn */, uint32_t{0x09C7} /* Mc */,
                            uint32_t{0x2166} /* Nl */, uint32_t{0x24B6} /* circled A */,
                            uint32_t{0x200D} /* ZWJ */, uint32_t{0x65E5}}) {
    EXPECT_TRUE(unicode::is_word_char(cp)) << std::hex << cp;
  }
  for (const uint32_t cp : {uint32_t{' '}, uint32_t{'-'}, uint32_t{0x00BD} /* No */,
                            uint32_t{0x20AC} /* Sc */, uint32_t{0x1F600}, uint32_t{0x11DB0}}) {
    EXPECT_FALSE(unicode::is_word_char(cp)) << std::hex << cp;
  }
}

TEST(Unicode, DecodesAndEncodesUtf8) {
  const std::string s = "a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80";
  std::vector<uint32_t> cps;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = 0;
    pos += unicode::decode_utf8(s, pos, cp);
    cps.push_back(cp);
  }
  EXPECT_EQ(cps, (std::vector<uint32_t>{'a', 0xE9, 0x65E5, 0x1F600}));
  std::string back;
  for (const uint32_t cp : cps) unicode::append_utf8(cp, back);
  EXPECT_EQ(back, s);
}

TEST(Unicode, InvalidSequencesDecodeOneByteAtATime) {
  uint32_t cp = 0;
  EXPECT_EQ(unicode::decode_utf8("\xE2\x82", 0, cp), 1u);  // truncated
  EXPECT_EQ(cp, 0xFFFDu);
  EXPECT_EQ(unicode::decode_utf8("\xC0\x80", 0, cp), 1u);  // overlong
  EXPECT_EQ(unicode::decode_utf8("\xED\xA0\x80", 0, cp), 1u);  // surrogate
  EXPECT_FALSE(unicode::is_valid_utf8("ok\xF5"));
  EXPECT_TRUE(unicode::is_valid_utf8("ok \xF4\x8F\xBF\xBF"));
}

TEST(Unicode, LossyConversionMatchesRustFromUtf8Lossy) {
  const std::string fffd = "\xEF\xBF\xBD";
  // A truncated but valid prefix is one replacement; bytes that cannot start one are one each.
  EXPECT_EQ(unicode::to_valid_utf8_lossy("a\xE2\x82" "b"), "a" + fffd + "b");
  EXPECT_EQ(unicode::to_valid_utf8_lossy("\xF0\x9F\x98"), fffd);
  EXPECT_EQ(unicode::to_valid_utf8_lossy("\xC0\x80"), fffd + fffd);
  EXPECT_EQ(unicode::to_valid_utf8_lossy("\xE0\x80"), fffd + fffd);
  EXPECT_EQ(unicode::to_valid_utf8_lossy("\xC3\xA9"), "\xC3\xA9");
}

TEST(ByteLevel, MapsEveryByteToAPrintableStandInAndBack) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string encoded;
  byte_level::encode_bytes(all, encoded);
  EXPECT_TRUE(unicode::is_valid_utf8(encoded));
  std::string decoded;
  ASSERT_TRUE(byte_level::decode_token(encoded, decoded));
  EXPECT_EQ(decoded, all);
  // GPT-2's table: space is Ġ (U+0120), newline Ċ (U+010A), printable ASCII is itself.
  std::string space;
  byte_level::encode_bytes(" \nA", space);
  EXPECT_EQ(space, "\xC4\xA0\xC4\x8A" "A");
  std::string out;
  EXPECT_FALSE(byte_level::decode_token("x y", out));  // a real space is not a stand-in
  EXPECT_TRUE(out.empty());
}

TEST(ByteLevel, SplitsLikeTheGpt2Regex) {
  const std::string text = "Hello  world\n\n x's 123abc!! don't\tgo  ";
  std::vector<std::pair<size_t, size_t>> ranges;
  byte_level::split_gpt2(text, ranges);
  std::vector<std::string> pieces;
  for (const auto& [b, e] : ranges) pieces.push_back(text.substr(b, e - b));
  // `\s+(?!\S)` leaves one space for the next word; ` ?X+` takes one leading space.
  EXPECT_EQ(pieces, (std::vector<std::string>{"Hello", " ", " world", "\n\n", " x", "'s", " 123",
                                              "abc", "!!", " don", "'t", "\t", "go", "  "}));
}

TEST(ByteLevel, SplitCoversUnicodeClasses) {
  const std::string text = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xD9\xA3\xD9\xA4 \xF0\x9F\x98\x80!";
  std::vector<std::pair<size_t, size_t>> ranges;
  byte_level::split_gpt2(text, ranges);
  std::vector<std::string> pieces;
  for (const auto& [b, e] : ranges) pieces.push_back(text.substr(b, e - b));
  EXPECT_EQ(pieces, (std::vector<std::string>{"caf\xC3\xA9", " \xE6\x97\xA5\xE6\x9C\xAC",
                                              " \xD9\xA3\xD9\xA4", " \xF0\x9F\x98\x80!"}));
}

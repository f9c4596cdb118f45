#include "rne/runner/text_stream.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace rne::runner {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8StreamTest, HoldsASplitCharacterUntilItIsComplete) {
  Utf8Stream s;
  EXPECT_EQ(s.push("caf\xC3"), "caf");
  EXPECT_EQ(s.push("\xA9!"), "\xC3\xA9!");
}

TEST(Utf8StreamTest, FourByteEmojiFedOneByteAtATime) {
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600
  Utf8Stream s;
  EXPECT_EQ(s.push(emoji.substr(0, 1)), "");
  EXPECT_EQ(s.push(emoji.substr(1, 1)), "");
  EXPECT_EQ(s.push(emoji.substr(2, 1)), "");
  EXPECT_EQ(s.push(emoji.substr(3, 1)), emoji);
}

TEST(Utf8StreamTest, MalformedBytesBecomeReplacementCharactersWithoutStalling) {
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xFF" "b"), "a" + kReplacement + "b");
  EXPECT_EQ(s.push("\xC3" "x"), kReplacement + "x");    // lead byte, then not a continuation
  EXPECT_EQ(s.push("\x80"), kReplacement);              // stray continuation byte
  EXPECT_EQ(s.push("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);  // surrogate
}

TEST(Utf8StreamTest, FlushTurnsAnUnfinishedCharacterIntoOneReplacement) {
  Utf8Stream s;
  EXPECT_EQ(s.push("ok\xE2\x82"), "ok");
  EXPECT_EQ(s.flush(), kReplacement);
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8StreamTest, AnySplitOfValidTextReassemblesExactlyAndOnlyOnBoundaries) {
  const std::string text = "Zażółć gęślą jaźń, 東京, 😀👍🏽 and tabs\t\n";
  std::mt19937 gen(3);
  for (int trial = 0; trial < 200; ++trial) {
    Utf8Stream s;
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
      const size_t n = 1 + gen() % 4;
      std::string piece = s.push(text.substr(i, n));
      // Every released piece is itself valid UTF-8: re-streaming it changes nothing.
      Utf8Stream check;
      EXPECT_EQ(check.push(piece), piece);
      EXPECT_EQ(check.flush(), "");
      out += piece;
      i += n;
    }
    out += s.flush();
    ASSERT_EQ(out, text);
  }
}

TEST(StopStringFilterTest, StopsBeforeTheStopStringAndDropsWhatFollows) {
  StopStringFilter f({"<END>"});
  std::string out;
  for (char c : std::string("Hello <END> world")) out += f.push(std::string(1, c));
  out += f.flush();
  EXPECT_EQ(out, "Hello ");
  EXPECT_TRUE(f.stopped());
}

TEST(StopStringFilterTest, HoldsAPossiblePrefixAndReleasesItWhenItDiverges) {
  StopStringFilter f({"\nUser:"});
  EXPECT_EQ(f.push("Paris.\nUs"), "Paris.");
  EXPECT_EQ(f.push("ually"), "\nUsually");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.push(" yes\nU"), " yes");
  EXPECT_EQ(f.flush(), "\nU");
}

TEST(StopStringFilterTest, EarliestOfSeveralStopStringsWins) {
  StopStringFilter f({"bb", "a"});
  EXPECT_EQ(f.push("xxabb"), "xx");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.push("more"), "");
}

TEST(StopStringFilterTest, WithoutStopStringsEverythingPassesThrough) {
  StopStringFilter f({});
  EXPECT_EQ(f.push("abc"), "abc");
  EXPECT_EQ(f.flush(), "");
}

}  // namespace
}  // namespace rne::runner

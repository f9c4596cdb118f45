// The BPE model on hand-made vocabularies whose results can be worked out by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

using rne::tokenizer::TokenId;
using rne::tokenizer::testing::bpe_json;
using rne::tokenizer::testing::load;
using Ids = std::vector<TokenId>;

namespace {
const std::string kVocab = R"({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "<unk>": 6})";
}

TEST(Bpe, AppliesLowestRankMergeFirst) {
  // (b,c) outranks (a,b): a b c -> a bc -> abc.
  auto t = load(bpe_json(kVocab, R"(["b c", "a b", "a bc"])"));
  EXPECT_EQ(t.encode("abc"), (Ids{5}));
  EXPECT_EQ(t.encode("abab"), (Ids{3, 3}));
  EXPECT_EQ(t.encode("cab"), (Ids{2, 3}));
  // (a,b) outranks (b,c): a b c -> ab c, and no (ab, c) merge exists.
  auto u = load(bpe_json(kVocab, R"(["a b", "b c", "a bc"])"));
  EXPECT_EQ(u.encode("abc"), (Ids{3, 2}));
}

TEST(Bpe, AcceptsBothMergeForms) {
  auto strings = load(bpe_json(kVocab, R"(["b c", "a bc"])"));
  auto pairs = load(bpe_json(kVocab, R"([["b", "c"], ["a", "bc"]])"));
  for (const std::string text : {"abc", "abcabc", "cba", "bcab"}) {
    EXPECT_EQ(strings.encode(text), pairs.encode(text)) << text;
  }
  EXPECT_EQ(pairs.encode("abcabc"), (Ids{5, 5}));
}

TEST(Bpe, TiesGoToTheLeftmostPair) {
  auto t = load(bpe_json(R"({"a": 0, "aa": 1})", R"(["a a"])"));
  EXPECT_EQ(t.encode("aaa"), (Ids{1, 0}));
  EXPECT_EQ(t.encode("aaaaa"), (Ids{1, 1, 0}));
}

TEST(Bpe, LongWordsMergeCorrectly) {
  // a^n -> (aa)^(n/2) -> (aaaa)^(n/4): exercises the priority queue on a 100k-symbol word.
  auto t = load(bpe_json(R"({"a": 0, "aa": 1, "aaaa": 2})", R"(["a a", "aa aa"])"));
  EXPECT_EQ(t.encode(std::string(100000, 'a')), Ids(25000, 2));
  EXPECT_EQ(t.encode(std::string(10, 'a')), (Ids{2, 2, 1}));
  // Cached words give the same answer the second time.
  EXPECT_EQ(t.encode(std::string(10, 'a')), (Ids{2, 2, 1}));
}

TEST(Bpe, UnknownCharactersUseUnkFusedOrNot) {
  auto fused = load(bpe_json(kVocab, "[]", R"(, "unk_token": "<unk>", "fuse_unk": true)"));
  EXPECT_EQ(fused.encode("axyb"), (Ids{0, 6, 1}));
  auto separate = load(bpe_json(kVocab, "[]", R"(, "unk_token": "<unk>")"));
  EXPECT_EQ(separate.encode("axyb"), (Ids{0, 6, 6, 1}));
  // Without an unk token, unknown characters are dropped (HF does the same).
  auto none = load(bpe_json(kVocab, "[]"));
  EXPECT_EQ(none.encode("axyb"), (Ids{0, 1}));
}

TEST(Bpe, ByteFallbackSpellsUnknownCharactersInBytes) {
  const std::string vocab =
      R"({"a": 0, "<unk>": 1, "<0xC3>": 2, "<0xA9>": 3, "<0xE6>": 4, "<0x97>": 5})";
  auto t = load(bpe_json(vocab, "[]", R"(, "unk_token": "<unk>", "byte_fallback": true)"));
  EXPECT_EQ(t.encode("a\xC3\xA9" "a"), (Ids{0, 2, 3, 0}));       // é -> <0xC3><0xA9>
  EXPECT_EQ(t.encode("\xE6\x97\xA5"), (Ids{1}));                  // <0xA5> missing -> unk
  EXPECT_EQ(t.decode({0, 2, 3, 0}), "a <0xC3> <0xA9> a");  // no decoder: joined with spaces
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocab) {
  // Without ignore_merges "abc" would become ab c (the only merge).
  auto t = load(bpe_json(kVocab, R"(["a b"])", R"(, "ignore_merges": true)"));
  EXPECT_EQ(t.encode("abc"), (Ids{5}));
  EXPECT_EQ(t.encode("abab"), (Ids{3, 3}));
}

// Normalizers, pre-tokenizers, added tokens, the post-processor and decoding (whole and
// streaming), on small hand-made tokenizers. Split behaviours are checked against outputs of
// HF `tokenizers` (pre_tokenizers.Split(...).pre_tokenize_str) recorded in the expectations.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "rne/json/json.h"
#include "pre_tokenizers.h"
#include "test_util.h"

using rne::tokenizer::Piece;
using rne::tokenizer::TokenId;
using rne::tokenizer::testing::bpe_json;
using rne::tokenizer::testing::load;
using Ids = std::vector<TokenId>;
using Strings = std::vector<std::string>;
namespace json = rne::json;

namespace {

Strings pre_tokenize(const std::string& config, const std::string& text, bool at_start = true) {
  auto v = json::parse(config);
  EXPECT_TRUE(v.ok()) << v.error().message;
  auto pre = rne::tokenizer::make_pre_tokenizer(*v, "pre_tokenizer");
  EXPECT_TRUE(pre.ok()) << (pre.ok() ? "" : pre.error().message);
  std::vector<Piece> pieces{{text, at_start}};
  pre.value()->split(pieces);
  Strings out;
  for (const Piece& p : pieces) out.push_back(p.text);
  return out;
}

std::string split(const char* behavior, bool invert = false) {
  return std::string(R"({"type": "Split", "pattern": {"String": "-"}, "behavior": ")") + behavior +
         R"(", "invert": )" + (invert ? "true" : "false") + "}";
}

// A SentencePiece-style tokenizer: ▁ normalizer, byte fallback, Gemma's decoder, <bos> template.
const char* kSentencePiece = R"({
  "added_tokens": [
    {"id": 0, "content": "<bos>", "special": true, "normalized": false},
    {"id": 1, "content": "<eos>", "special": true, "normalized": false},
    {"id": 2, "content": "<turn>", "special": true, "normalized": false},
    {"id": 3, "content": "[x]", "special": false, "normalized": false, "lstrip": true, "rstrip": true}
  ],
  "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
  "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious"},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<bos>": {"id": "<bos>", "ids": [0], "tokens": ["<bos>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}]},
  "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
    "vocab": {"<bos>": 0, "<eos>": 1, "<turn>": 2, "[x]": 3, "<unk>": 4, "h": 5, "i": 6, "\u2581": 7,
              "hi": 8, "\u2581hi": 9, "<0xC3>": 10, "<0xA9>": 11},
    "merges": ["h i", "\u2581 hi"]}
})";

}  // namespace

TEST(PreTokenizers, SplitBehavioursMatchHf) {
  const std::string text = "a--b-c-";
  EXPECT_EQ(pre_tokenize(split("Removed"), text), (Strings{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize(split("Isolated"), text), (Strings{"a", "-", "-", "b", "-", "c", "-"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious"), text), (Strings{"a-", "-", "b-", "c-"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext"), text), (Strings{"a", "-", "-b", "-c", "-"}));
  EXPECT_EQ(pre_tokenize(split("Contiguous"), text), (Strings{"a", "--", "b", "-", "c", "-"}));
  const std::string inv = "-a--b-c";
  EXPECT_EQ(pre_tokenize(split("Removed", true), inv), (Strings{"-", "-", "-", "-"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious", true), inv), (Strings{"-a", "-", "-b", "-c"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext", true), inv), (Strings{"-", "a-", "-", "b-", "c"}));
  EXPECT_EQ(pre_tokenize(split("Contiguous", true), inv), (Strings{"-", "a", "--", "b", "-", "c"}));
}

TEST(PreTokenizers, DigitsIndividuallyOrAsRuns) {
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits", "individual_digits": false})", "a123b4"),
            (Strings{"a", "123", "b", "4"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits", "individual_digits": true})", "a12b"),
            (Strings{"a", "1", "2", "b"}));
}

TEST(PreTokenizers, MetaspacePrependsAtTextStartOnlyForFirstScheme) {
  const char* first = R"({"type": "Metaspace", "replacement": "_", "prepend_scheme": "first", "split": true})";
  EXPECT_EQ(pre_tokenize(first, "hi you", true), (Strings{"_hi", "_you"}));
  EXPECT_EQ(pre_tokenize(first, "hi you", false), (Strings{"hi", "_you"}));
  const char* never = R"({"type": "Metaspace", "replacement": "_", "prepend_scheme": "never", "split": false})";
  EXPECT_EQ(pre_tokenize(never, "hi you"), (Strings{"hi_you"}));
}

TEST(PreTokenizers, ByteLevelMapsBytesAndSplits) {
  const char* config = R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})";
  // Prefix space added; "Ġ" (U+0120) stands for the space byte.
  EXPECT_EQ(pre_tokenize(config, "hi you"), (Strings{"\xC4\xA0hi", "\xC4\xA0you"}));
}

TEST(Tokenizer, SentencePieceStyleEncodeWithTemplateAndAddedTokens) {
  auto t = load(kSentencePiece);
  EXPECT_EQ(t.encode("hi hi", false), (Ids{8, 9}));
  EXPECT_EQ(t.encode("hi hi", true), (Ids{0, 8, 9}));
  // Added tokens are split out first; the text between them is encoded on its own.
  EXPECT_EQ(t.encode("hi<turn> hi<eos>", false), (Ids{8, 2, 9, 1}));
  // lstrip/rstrip: the spaces around [x] belong to the token.
  EXPECT_EQ(t.encode("hi  [x]  hi", false), (Ids{8, 3, 8}));
  // é is not in the vocab: byte fallback.
  EXPECT_EQ(t.encode("h\xC3\xA9", false), (Ids{5, 10, 11}));
  EXPECT_EQ(t.encode("", true), (Ids{0}));
}

TEST(Tokenizer, DecodesWithSkipSpecialAndByteFallback) {
  auto t = load(kSentencePiece);
  EXPECT_EQ(t.decode({0, 8, 9, 2, 5, 10, 11}, false), "<bos>hi hi<turn>h\xC3\xA9");
  EXPECT_EQ(t.decode({0, 8, 9, 2, 5, 10, 11}, true), "hi hih\xC3\xA9");
  // An incomplete byte sequence becomes one U+FFFD per byte token.
  EXPECT_EQ(t.decode({8, 10, 8}, false), "hi\xEF\xBF\xBDhi");
  EXPECT_EQ(t.decode({8, 999}, false), "hi");  // unknown ids are skipped
}

TEST(Tokenizer, StreamDecoderYieldsRawBytesPerToken) {
  auto t = load(kSentencePiece);
  auto stream = t.stream_decoder(true);
  Strings pieces;
  for (const TokenId id : Ids{0, 9, 10, 11, 2, 8}) pieces.push_back(stream.next(id));
  // é arrives as two single-byte pieces; the caller buffers until the character is complete.
  EXPECT_EQ(pieces, (Strings{"", " hi", "\xC3", "\xA9", "", "hi"}));
}

TEST(Tokenizer, StreamDecoderStripsOnlyTheStartOfTheText) {
  const std::string decoder = R"("decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "_"}, "content": " "}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},)";
  auto t = load(bpe_json(R"({"_a": 0, "_b": 1})", "[]", "", decoder));
  EXPECT_EQ(t.decode({0, 1, 0}), "a b a");
  auto stream = t.stream_decoder();
  EXPECT_EQ(stream.next(0), "a");
  EXPECT_EQ(stream.next(1), " b");
  stream.reset();
  EXPECT_EQ(stream.next(1), "b");
}

TEST(Tokenizer, ByteLevelDecodeIsLossyOnlyForIncompleteCharacters) {
  // "é" is bytes C3 A9, whose byte-level stand-ins are "Ã" (U+00C3) and "©" (U+00A9).
  const std::string decoder = R"("decoder": {"type": "ByteLevel"},)";
  auto t = load(bpe_json("{\"\xC3\x83\": 0, \"\xC2\xA9\": 1, \"x\": 2}", "[]", "", decoder));
  EXPECT_EQ(t.decode({2, 0, 1, 2}), "x\xC3\xA9x");
  EXPECT_EQ(t.decode({2, 0, 2}), "x\xEF\xBF\xBDx");
  auto stream = t.stream_decoder();
  EXPECT_EQ(stream.next(0) + stream.next(1), "\xC3\xA9");
}

TEST(Tokenizer, VocabularyLookups) {
  auto t = load(kSentencePiece);
  EXPECT_EQ(t.token_to_id("\xE2\x96\x81hi"), 9);
  EXPECT_EQ(t.token_to_id("<turn>"), 2);
  EXPECT_FALSE(t.token_to_id("nope").has_value());
  EXPECT_EQ(t.id_to_token(8), "hi");
  EXPECT_FALSE(t.id_to_token(12).has_value());
  EXPECT_FALSE(t.id_to_token(-1).has_value());
  EXPECT_EQ(t.vocab_size(), 12u);
  EXPECT_TRUE(t.is_special(1));
  EXPECT_FALSE(t.is_special(3));  // [x] is added but not special
  EXPECT_FALSE(t.is_special(8));
}

TEST(Tokenizer, InvalidUtf8InputFallsBackToBytes) {
  auto t = load(kSentencePiece);
  // A lone 0xC3 is not a character: it is spelled with its byte token, nothing is lost.
  EXPECT_EQ(t.encode("hi\xC3", false), (Ids{8, 10}));
}

TEST(Tokenizer, CopiesShareStateAndEncodeConcurrently) {
  auto t = load(kSentencePiece);
  const std::vector<std::string> texts = {"hi hi", "h\xC3\xA9 hi", "hi<turn> hi", "hihi hi hi"};
  std::vector<Ids> expected;
  for (const auto& text : texts) expected.push_back(t.encode(text));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([copy = t, &texts, &expected, &mismatches, k] {
      for (int i = 0; i < 2000; ++i) {
        const size_t j = static_cast<size_t>(i + k) % texts.size();
        if (copy.encode(texts[j]) != expected[j]) ++mismatches[static_cast<size_t>(k)];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

// Special-token text read as text (SpecialTokens::kAsText, HF `split_special_tokens=True`) and
// prompts encoded in parts (encode_parts): the template's markers are tokens, the same text in a
// user's part is not. Ids vs HF on real tokenizers: tests/parity/test_cpp_tokenizer_parity.py.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "test_util.h"

using rne::tokenizer::SpecialTokens;
using rne::tokenizer::TextPart;
using rne::tokenizer::TokenId;
using rne::tokenizer::Tokenizer;
using rne::tokenizer::testing::load;
using Ids = std::vector<TokenId>;

namespace {

constexpr TokenId kTurn = 0, kEos = 1, kX = 2, kNormTurn = 3, kH = 4, kI = 5, kHi = 6;
constexpr TokenId kFirstByte = 7;  // <0x00>; byte b is kFirstByte + b

// Byte-fallback BPE: "h" "i" merge into "hi"; every other character is spelled in byte tokens.
// Added: <turn> and <eos> (special), [x] (not special, eats the spaces around it), and, only
// when `normalized_special`, "%turn%" (special, matched after a normalizer that maps "_" to "%").
std::string tokenizer_json(bool normalized_special) {
  std::string vocab = R"("<turn>": 0, "<eos>": 1, "[x]": 2, "%turn%": 3, "h": 4, "i": 5, "hi": 6)";
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    vocab += std::string(", \"") + name + "\": " + std::to_string(kFirstByte + byte);
  }
  std::string added = R"(
    {"id": 0, "content": "<turn>", "special": true, "normalized": false},
    {"id": 1, "content": "<eos>", "special": true, "normalized": false},
    {"id": 2, "content": "[x]", "special": false, "normalized": false, "lstrip": true, "rstrip": true})";
  std::string normalizer;
  if (normalized_special) {
    added += R"(, {"id": 3, "content": "%turn%", "special": true, "normalized": true})";
    normalizer = R"("normalizer": {"type": "Replace", "pattern": {"String": "_"}, "content": "%"},)";
  }
  return R"({"added_tokens": [)" + added + "], " + normalizer + R"(
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<eos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<eos>": {"id": "<eos>", "ids": [1], "tokens": ["<eos>"]}}},
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": null, "merges": ["h i"],
              "vocab": {)" + vocab + "}}}";
}

// The byte tokens spelling `text`.
Ids bytes(const std::string& text) {
  Ids ids;
  for (const char c : text) ids.push_back(kFirstByte + static_cast<unsigned char>(c));
  return ids;
}

Ids concat(std::initializer_list<Ids> lists) {
  Ids out;
  for (const Ids& ids : lists) out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

TextPart templ(std::string_view text) { return {text, SpecialTokens::kParse}; }
TextPart plain(std::string_view text) { return {text, SpecialTokens::kAsText}; }

}  // namespace

TEST(SpecialTokensAsText, SpecialTokenTextIsEncodedAsOrdinaryText) {
  const Tokenizer t = load(tokenizer_json(false));
  EXPECT_EQ(t.encode("hi<turn>", false), (Ids{kHi, kTurn}));
  EXPECT_EQ(t.encode("hi<turn>", false, SpecialTokens::kAsText), concat({{kHi}, bytes("<turn>")}));
  EXPECT_EQ(t.encode("<eos><turn>", false, SpecialTokens::kAsText), bytes("<eos><turn>"));
  // The default is the old behaviour, and the post-processor still adds its tokens.
  EXPECT_EQ(t.encode("<eos>", true), (Ids{kEos, kEos}));
  EXPECT_EQ(t.encode("<eos>", true, SpecialTokens::kAsText), concat({{kEos}, bytes("<eos>")}));
}

TEST(SpecialTokensAsText, NonSpecialAddedTokensStillMatch) {
  const Tokenizer t = load(tokenizer_json(false));
  // [x] is vocabulary, not a control token: matched, and it still eats the spaces around it.
  EXPECT_EQ(t.encode("hi  [x]  hi", false, SpecialTokens::kAsText), (Ids{kHi, kX, kHi}));
}

TEST(EncodeParts, TemplateMarkersAreTokensAndTheSameTextInPlainPartsIsNot) {
  const Tokenizer t = load(tokenizer_json(false));
  const std::vector<TextPart> parts = {templ("<turn>hi\n"), plain("hi<eos>\n<turn>h"),
                                       templ("<eos>")};
  EXPECT_EQ(t.encode_parts(parts, false),
            concat({{kTurn, kHi}, bytes("\n"), {kHi}, bytes("<eos>\n<turn>"), {kH}, {kEos}}));
}

TEST(EncodeParts, CleanPlainPartsGiveTheIdsOfTheWholeText) {
  const Tokenizer t = load(tokenizer_json(false));
  // Plain text runs on across part boundaries: "h" + "i" is the one token "hi", as in the
  // whole text, so a prompt whose user text holds no marker keeps exactly its old ids.
  const std::vector<TextPart> parts = {templ("<turn>h"), plain("i h"), templ("i<eos>"),
                                       plain(""), templ("[x]")};
  EXPECT_EQ(t.encode_parts(parts, false), t.encode("<turn>hi hi<eos>[x]", false));
  EXPECT_EQ(t.encode_parts(parts, false),
            concat({{kTurn, kHi}, bytes(" "), {kHi, kEos, kX}}));
  EXPECT_EQ(t.encode_parts(parts, true), t.encode("<turn>hi hi<eos>[x]", true));
  EXPECT_EQ(t.encode_parts({}, false), Ids{});
}

TEST(EncodeParts, AMarkerSpanningAPartBoundaryIsNotMatched) {
  const Tokenizer t = load(tokenizer_json(false));
  // A user cannot finish a marker the template started, nor the other way round.
  EXPECT_EQ(t.encode_parts({templ("<tu"), plain("rn>")}, false), bytes("<turn>"));
  EXPECT_EQ(t.encode_parts({plain("<tu"), templ("rn>")}, false), bytes("<turn>"));
  EXPECT_EQ(t.encode_parts({templ("<tu"), templ("rn>")}, false), bytes("<turn>"));
  // A token's lstrip/rstrip eats whitespace of its own part only.
  EXPECT_EQ(t.encode_parts({templ("[x]"), plain(" ")}, false), concat({{kX}, bytes(" ")}));
}

TEST(EncodeParts, NormalizedSpecialTokensAreReadPartByPart) {
  const Tokenizer t = load(tokenizer_json(true));
  // "_turn_" normalizes to "%turn%", a special token matched after normalization.
  EXPECT_EQ(t.encode("_turn_", false), (Ids{kNormTurn}));
  EXPECT_EQ(t.encode("_turn_", false, SpecialTokens::kAsText), bytes("%turn%"));
  EXPECT_EQ(t.encode_parts({templ("_turn_"), plain("_turn_"), templ("_turn_")}, false),
            concat({{kNormTurn}, bytes("%turn%"), {kNormTurn}}));
}

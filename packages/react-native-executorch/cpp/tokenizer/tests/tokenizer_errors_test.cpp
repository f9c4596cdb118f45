// Bad input is an error value that says what is wrong and where.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

using rne::tokenizer::ErrorCode;
using rne::tokenizer::Tokenizer;
using rne::tokenizer::testing::bpe_json;

namespace {

rne::tokenizer::Error load_error(const std::string& json) {
  auto result = Tokenizer::from_json(json);
  EXPECT_FALSE(result.ok());
  return result.ok() ? rne::tokenizer::Error{ErrorCode::kIo, "unexpected success"} : result.error();
}

void expect_mentions(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "\"" << part << "\" not in: " << message;
  }
}

const std::string kVocab = R"({"a": 0, "b": 1})";

}  // namespace

TEST(TokenizerErrors, MissingFileNamesThePath) {
  auto result = Tokenizer::from_file("no/such/dir/tokenizer.json");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kFileNotFound);
  expect_mentions(result.error().message, {"no/such/dir/tokenizer.json"});
  // A directory (e.g. the model folder instead of its tokenizer.json) is not a file.
  result = Tokenizer::from_file(".");
  ASSERT_FALSE(result.ok());
  expect_mentions(result.error().message, {"is a directory", "tokenizer.json"});
}

TEST(TokenizerErrors, NotJsonSaysWhere) {
  const auto e = load_error("{\n  \"model\": [1, 2,,]\n}");
  EXPECT_EQ(e.code, ErrorCode::kInvalidJson);
  expect_mentions(e.message, {"not valid JSON", "line 2"});
}

TEST(TokenizerErrors, MissingOrIllTypedFieldsNameTheirPath) {
  auto e = load_error(R"({"model": {"type": "BPE", "merges": []}})");
  EXPECT_EQ(e.code, ErrorCode::kInvalidTokenizer);
  expect_mentions(e.message, {"model.vocab"});
  e = load_error(R"({"version": "1.0"})");
  expect_mentions(e.message, {"missing field model"});
  e = load_error(bpe_json(kVocab, "[]", R"(, "byte_fallback": "yes")"));
  expect_mentions(e.message, {"model.byte_fallback", "true or false"});
  e = load_error("[1, 2]");
  expect_mentions(e.message, {"JSON object"});
}

TEST(TokenizerErrors, BadMergesAndVocab) {
  auto e = load_error(bpe_json(kVocab, R"(["a b"])"));  // "ab" is not in the vocab
  EXPECT_EQ(e.code, ErrorCode::kInvalidTokenizer);
  expect_mentions(e.message, {"model.merges[0]", "\"ab\" is not in the vocab"});
  e = load_error(bpe_json(kVocab, R"(["a b c"])"));
  expect_mentions(e.message, {"model.merges[0]"});
  e = load_error(bpe_json(R"({"a": 0, "b": 0})", "[]"));
  expect_mentions(e.message, {"id 0 is used twice"});
  e = load_error(bpe_json(R"({"a": 0, "b": 2000000000})", "[]"));
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  expect_mentions(e.message, {"sparse ids", "2000000000"});
  e = load_error(bpe_json(kVocab, "[]", R"(, "unk_token": "<unk>")"));
  expect_mentions(e.message, {"unk_token", "<unk>"});
}

TEST(TokenizerErrors, UnsupportedComponentsAreNamed) {
  auto e = load_error(R"({"model": {"type": "WordPiece", "vocab": {}}})");
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  expect_mentions(e.message, {"WordPiece", "model.type", "BPE"});

  e = load_error(bpe_json(kVocab, "[]", "", R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Digits"}, {"type": "Whitespace"}]},)"));
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  expect_mentions(e.message, {"Whitespace", "pre_tokenizer.pretokenizers[1]", "ByteLevel"});

  e = load_error(bpe_json(kVocab, "[]", "", R"("normalizer": {"type": "NFKC"},)"));
  expect_mentions(e.message, {"normalizer", "NFKC"});

  e = load_error(bpe_json(kVocab, "[]", "", R"("decoder": {"type": "WordPiece"},)"));
  expect_mentions(e.message, {"decoder", "WordPiece"});

  e = load_error(bpe_json(kVocab, "[]", "", R"("post_processor": {"type": "BertProcessing"},)"));
  expect_mentions(e.message, {"post_processor", "BertProcessing"});

  e = load_error(bpe_json(kVocab, "[]", "", R"("pre_tokenizer": {"type": "Split",
      "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated"},)"));
  expect_mentions(e.message, {"Split regex", "\\p{N}{1,3}"});

  e = load_error(bpe_json(kVocab, "[]", R"(, "continuing_subword_prefix": "##")"));
  expect_mentions(e.message, {"continuing_subword_prefix"});
}

TEST(TokenizerErrors, CorruptDocumentsAreErrorsNotCrashes) {
  const std::string valid = bpe_json(
      R"({"a": 0, "b": 1, "ab": 2, "<s>": 3, "<0x41>": 4, "abb": 5})", R"(["a b", ["ab", "b"]])",
      R"(, "byte_fallback": true)",
      R"("added_tokens": [{"id": 3, "content": "<s>", "special": true}],
         "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "_"},
         "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},)");
  ASSERT_TRUE(Tokenizer::from_json(valid).ok());
  // Every proper prefix is incomplete JSON.
  for (size_t n = 0; n < valid.size(); ++n) {
    auto result = Tokenizer::from_json(valid.substr(0, n));
    ASSERT_FALSE(result.ok()) << n;
    EXPECT_EQ(result.error().code, ErrorCode::kInvalidJson) << n;
  }
  // Any single corrupted byte either still loads (and then encodes) or is a described error.
  for (size_t i = 0; i < valid.size(); ++i) {
    for (const char c : {'"', '{', ']', '0', '\\', '\xC3', '-'}) {
      std::string corrupt = valid;
      corrupt[i] = c;
      auto result = Tokenizer::from_json(corrupt);
      if (result.ok()) {
        result.value().encode("ab a <s>b");
      } else {
        EXPECT_FALSE(result.error().message.empty());
      }
    }
  }
}

// The runner's token -> text stream (runner/token_text.h): special tokens add no text unless
// the generation keeps them, on a tokenizer shaped like Gemma 4's, whose conversation markers
// (thought channel, tool calls, the `<|"|>` string quote) are special tokens.
#include "rne/runner/token_text.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "rne/runner/text_stream.h"

namespace rne::runner {
namespace {

using tokenizer::TokenId;
using tokenizer::Tokenizer;

// Gemma 4's markers and stop token as special added tokens, one non-special added token, and a
// byte-fallback model with no merges, so any other text encodes byte by byte.
Tokenizer gemma4_shaped() {
  const char* added[] = {"<bos>",         "<eos>", "<turn|>", "<|channel>", "<channel|>",
                         "<|tool_call>",  "<tool_call|>", "<|\\\"|>"};
  std::string tokens;
  std::string vocab;
  int id = 0;
  for (const char* content : added) {
    tokens += std::string(id ? "," : "") + R"({"id": )" + std::to_string(id) + R"(, "content": ")" +
              content + R"(", "special": true, "normalized": false})";
    vocab += std::string(id ? "," : "") + "\"" + content + "\": " + std::to_string(id);
    ++id;
  }
  tokens += R"(, {"id": )" + std::to_string(id) + R"(, "content": "[x]", "special": false, "normalized": false})";
  vocab += ", \"[x]\": " + std::to_string(id++);
  vocab += ", \"<unk>\": " + std::to_string(id++);
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    vocab += std::string(", \"") + name + "\": " + std::to_string(id++);
  }
  const std::string json = R"({"added_tokens": [)" + tokens + R"(],
    "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "merges": [],
              "vocab": {)" + vocab + "}}}";
  auto loaded = Tokenizer::from_json(json);
  if (!loaded.ok()) {
    ADD_FAILURE() << loaded.error().message;
    std::abort();
  }
  return std::move(loaded).value();
}

// A thinking answer with a tool call, as Gemma 4 generates it, up to its end-of-turn token.
const std::string kGenerated =
    "<|channel>thought\nWeather in Kraków?<channel|><|tool_call>call:get_weather{city:<|\"|>Kraków"
    "<|\"|>,days:3}<tool_call|><turn|>";

// The text the runner streams for `ids`: token bytes through the stream, whole characters out.
std::string stream(const Tokenizer& tok, const std::vector<TokenId>& ids,
                   const std::vector<std::string>& keep) {
  auto text = TokenTextStream::create(tok, keep);
  EXPECT_TRUE(text.ok()) << text.error().message;
  Utf8Stream utf8;
  std::string out;
  for (const TokenId id : ids) out += utf8.push(text->next(id));
  return out + utf8.flush();
}

TEST(TokenTextStream, MarkersAreSingleSpecialTokens) {
  const Tokenizer tok = gemma4_shaped();
  const auto ids = tok.encode(kGenerated, false);
  for (const char* marker : {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|\"|>"}) {
    const auto id = tok.token_to_id(marker);
    ASSERT_TRUE(id.has_value()) << marker;
    EXPECT_TRUE(tok.is_special(*id)) << marker;
  }
  EXPECT_EQ(ids.front(), *tok.token_to_id("<|channel>"));
  EXPECT_EQ(ids.back(), *tok.token_to_id("<turn|>"));
}

TEST(TokenTextStream, WithoutKeptTokensEverySpecialTokenIsDropped) {
  const Tokenizer tok = gemma4_shaped();
  EXPECT_EQ(stream(tok, tok.encode("<bos>" + kGenerated, false), {}),
            "thought\nWeather in Kraków?call:get_weather{city:Kraków,days:3}");
}

TEST(TokenTextStream, KeptSpecialTokensAreStreamedAndTheOthersAreNot) {
  const Tokenizer tok = gemma4_shaped();
  const std::vector<std::string> markers = {"<|channel>", "<channel|>", "<|tool_call>",
                                            "<tool_call|>", "<|\"|>"};
  // <bos> and the end-of-turn <turn|> are still dropped; everything the parsers read is there.
  EXPECT_EQ(stream(tok, tok.encode("<bos>" + kGenerated, false), markers),
            kGenerated.substr(0, kGenerated.size() - std::string("<turn|>").size()));
  // Only what is named is kept.
  EXPECT_EQ(stream(tok, tok.encode(kGenerated, false), {"<|\"|>"}),
            "thought\nWeather in Kraków?call:get_weather{city:<|\"|>Kraków<|\"|>,days:3}");
}

TEST(TokenTextStream, UnknownOrNonSpecialTokensAreInvalidArgumentsNamingThem) {
  const Tokenizer tok = gemma4_shaped();
  auto unknown = TokenTextStream::create(tok, {"<|channel>", "<|think|>"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.error().message.find("\"<|think|>\" is not a token"), std::string::npos)
      << unknown.error().message;
  auto plain = TokenTextStream::create(tok, {"[x]"});
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(plain.error().message.find("\"[x]\" is not a special token"), std::string::npos)
      << plain.error().message;
}

}  // namespace
}  // namespace rne::runner

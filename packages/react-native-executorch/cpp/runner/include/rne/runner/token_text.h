// Generated token ids to the bytes of the text the runner streams, one token at a time.
#pragma once

#include <string>
#include <vector>

#include "rne/runner/result.h"
#include "rne/tokenizer/tokenizer.h"

namespace rne::runner {

// The stream decoder of one generation: special tokens (<eos>, <|im_end|>, ...) add no text,
// except the ones the caller keeps, whose text is streamed like any other token's. A chat
// format whose markers are special tokens (Gemma 4's thought channel `<|channel>` ...
// `<channel|>`, its tool calls `<|tool_call>` ... `<tool_call|>` with `<|"|>`-quoted strings)
// keeps them so the app's parsers see them.
class TokenTextStream {
 public:
  // `keep_special_tokens`: texts of special tokens of `tokenizer` to keep, resolved to ids once.
  // A text that is no token of the tokenizer, or one that is not special (its text is always
  // streamed), is a kInvalidArgument error naming it.
  static Result<TokenTextStream> create(const tokenizer::Tokenizer& tokenizer,
                                        const std::vector<std::string>& keep_special_tokens);

  // The raw bytes `id` adds to the text (possibly part of a UTF-8 character: see StreamDecoder).
  std::string next(tokenizer::TokenId id);

 private:
  TokenTextStream(const tokenizer::Tokenizer& tokenizer, std::vector<tokenizer::TokenId> kept)
      : tokenizer_(&tokenizer), decoder_(tokenizer.stream_decoder(false)), kept_(std::move(kept)) {}
  bool skipped(tokenizer::TokenId id) const;

  const tokenizer::Tokenizer* tokenizer_;
  tokenizer::StreamDecoder decoder_;
  std::vector<tokenizer::TokenId> kept_;  // a handful of ids: a linear search is fastest
};

}  // namespace rne::runner

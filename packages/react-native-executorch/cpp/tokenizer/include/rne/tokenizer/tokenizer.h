// Hugging Face `tokenizer.json` tokenizer: byte-level BPE (GPT-2 / SmolLM2 style) and
// SentencePiece-style BPE with byte fallback (Gemma style), with added/special tokens.
//
// Encoding follows the HF `tokenizers` pipeline: added tokens are split out of the text first;
// each remaining piece is normalized, pre-tokenized and run through the BPE model; the
// post-processor then adds template special tokens (e.g. <bos>) when asked to. Ids match the
// HF `tokenizers` package (checked by tests/parity/test_cpp_tokenizer_parity.py).
//
// A Tokenizer is cheap to copy (shared immutable state) and safe to use from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rne/tokenizer/result.h"

namespace rne::json {
class Value;
}

namespace rne::tokenizer {

using TokenId = int32_t;

// Byte offset of the first byte of `text` that does not start a valid UTF-8 sequence, or nullopt
// when all of `text` is valid UTF-8. encode() replaces such bytes; APIs that take text from users
// check with this first and reject invalid input instead of changing it silently.
std::optional<size_t> find_invalid_utf8(std::string_view text);

class StreamDecoder;

// How encode() reads the text of added tokens marked "special" (<|im_end|>, <turn|>, <eos>, ...).
enum class SpecialTokens {
  kParse,   // their text is the token: text a chat template wrote
  kAsText,  // ordinary text, like HF `split_special_tokens=True`: text a user, a tool or an app
            // wrote, so it cannot end a turn or open a system one. Non-special added tokens
            // (Gemma's newline runs, <table>, ...) are ordinary vocabulary and still match.
};

// One stretch of a prompt and how its special-token text is read.
struct TextPart {
  std::string_view text;
  SpecialTokens special_tokens = SpecialTokens::kParse;
};

class Tokenizer {
 public:
  // Loads a tokenizer.json file. Errors name the file and what is wrong or unsupported.
  static Result<Tokenizer> from_file(const std::string& path);
  // Loads tokenizer.json content already in memory.
  static Result<Tokenizer> from_json(std::string_view json);

  // Text (UTF-8) to ids. add_special_tokens applies the post-processor's template (e.g. a
  // leading <bos>), like HF `encode(text, add_special_tokens=True)`.
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = true) const;
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens,
                              SpecialTokens special_tokens) const;
  // Encodes the parts as one text in which added tokens are looked for part by part (a match
  // never spans two parts; special tokens only in kParse parts), while the ordinary text between
  // tokens runs on across part boundaries. So a prompt whose kAsText parts hold no special-token
  // text gets exactly the ids of encode(concatenation), and one whose parts do gets those texts
  // as ordinary text.
  std::vector<TokenId> encode_parts(const std::vector<TextPart>& parts,
                                    bool add_special_tokens) const;

  // Ids to text, through the tokenizer's decoder, like HF `decode`. Invalid UTF-8 (e.g. a byte
  // sequence cut in half) becomes U+FFFD as in HF. Unknown ids are skipped.
  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const;

  // Incremental decoding for streaming generation: see StreamDecoder.
  StreamDecoder stream_decoder(bool skip_special_tokens = false) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(TokenId id) const;
  // True for added tokens marked "special": true (e.g. <|im_end|>, <eos>).
  bool is_special(TokenId id) const;
  // Model vocabulary plus added tokens (HF get_vocab_size(with_added_tokens=True)).
  size_t vocab_size() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  static Result<Tokenizer> from_document(const json::Value& root);
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
};

// Turns generated ids into text one token at a time. next() returns the raw UTF-8 bytes this
// token adds; a multi-byte character may be split across tokens (byte-level and byte-fallback
// tokens carry single bytes), so feed the pieces to a UTF-8-safe buffer before display.
// Concatenating every piece gives the bytes that decode() turns into text (decode() also
// replaces invalid sequences by U+FFFD).
class StreamDecoder {
 public:
  std::string next(TokenId id);
  // Starts a new text: decoder steps that only apply at the start (e.g. Strip) apply again.
  void reset() { at_start_ = true; }

 private:
  friend class Tokenizer;
  StreamDecoder(std::shared_ptr<const Tokenizer::Impl> impl, bool skip_special)
      : impl_(std::move(impl)), skip_special_(skip_special) {}
  std::shared_ptr<const Tokenizer::Impl> impl_;
  bool skip_special_;
  bool at_start_ = true;
};

}  // namespace rne::tokenizer

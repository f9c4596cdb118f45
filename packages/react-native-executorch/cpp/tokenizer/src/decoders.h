// tokenizer.json "decoder": turns token strings back into text, step by step, with the exact
// semantics of HF `tokenizers` (some steps act per token, Fuse joins them, ByteLevel joins and
// decodes bytes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rne/json/json.h"
#include "rne/tokenizer/result.h"

namespace rne::tokenizer {

struct DecodeState {
  // Streaming: keep raw bytes (no U+FFFD substitution), since a character may continue in the
  // next token; and Strip steps after Fuse only touch the start of the text.
  bool streaming = false;
  // Whether tokens[0] is the first token of the text (Metaspace, Strip after Fuse).
  bool at_text_start = true;
  // Set once a Fuse step ran: the tokens are now the whole text.
  bool fused = false;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode(std::vector<std::string>& tokens, DecodeState& state) const = 0;
  // Steps, nested Sequences included, and the most bytes one input byte can become: load-time
  // bounds (kMaxPipelineSteps, kMaxPipelineGrowth).
  virtual size_t steps() const { return 1; }
  virtual double growth() const { return 1; }
};

// nullptr for a null/absent decoder (tokens are then joined with spaces, as in HF). A chain over
// the limits of config.h is an error.
Result<std::unique_ptr<Decoder>> make_decoder(const json::Value& config, const std::string& path);

}  // namespace rne::tokenizer

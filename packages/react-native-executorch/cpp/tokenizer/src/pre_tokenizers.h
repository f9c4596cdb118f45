// tokenizer.json "pre_tokenizer": splits normalized text into words that the BPE model encodes
// independently (and caches).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rne/json/json.h"
#include "rne/tokenizer/result.h"

namespace rne::tokenizer {

struct Piece {
  std::string text;
  // True when the piece begins at the start of the input text (Metaspace's "first" scheme).
  bool at_text_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their sub-pieces, in order.
  virtual void split(std::vector<Piece>& pieces) const = 0;
  // Steps, nested Sequences included, and the most bytes one input byte can become: load-time
  // bounds (kMaxPipelineSteps, kMaxPipelineGrowth).
  virtual size_t steps() const { return 1; }
  virtual double growth() const { return 1; }
};

// nullptr for a null/absent pre-tokenizer. A chain over the limits of config.h is an error.
Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const json::Value& config,
                                                         const std::string& path);

}  // namespace rne::tokenizer

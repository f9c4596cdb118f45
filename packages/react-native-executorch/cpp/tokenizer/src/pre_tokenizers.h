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
};

// nullptr for a null/absent pre-tokenizer.
Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const json::Value& config,
                                                         const std::string& path);

}  // namespace rne::tokenizer

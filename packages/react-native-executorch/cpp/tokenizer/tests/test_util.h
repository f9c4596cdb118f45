// Helpers for building small tokenizer.json documents in tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "rne/tokenizer/tokenizer.h"

namespace rne::tokenizer::testing {

// A tokenizer.json with a BPE model; `extra` is spliced in as further top-level members
// (e.g. R"("normalizer": {...},)").
inline std::string bpe_json(const std::string& vocab, const std::string& merges,
                            const std::string& model_options = "", const std::string& extra = "") {
  return "{" + extra + R"("model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": )" +
         merges + model_options + "}}";
}

inline Tokenizer load(const std::string& json) {
  auto result = Tokenizer::from_json(json);
  if (!result.ok()) {
    ADD_FAILURE() << result.error().message;
    std::abort();
  }
  return std::move(result).value();
}

}  // namespace rne::tokenizer::testing

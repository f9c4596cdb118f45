// The speculative-decoding options as the hosts take them (the seam's generate config, rne_llm's
// flags): the drafters' names and the options' ranges, declared once so that every host accepts
// and refuses the same values. The runner itself checks what needs the model (a draft length
// above its verify chunk, an assistant it does not have).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rne/runner/result.h"
#include "rne/runner/text_generator.h"

namespace rne::runner {

// The drafter drafter_name() calls `name`. "none" is not a choice: speculation is off when no
// drafter is given.
inline std::optional<Drafter> drafter_named(std::string_view name) {
  for (Drafter drafter : {Drafter::kPromptLookup, Drafter::kAssistant}) {
    if (name == drafter_name(drafter)) return drafter;
  }
  return std::nullopt;
}

// Checks the ranges: max_draft_tokens >= 1, or 0 for as many as the model verifies in one
// forward; 1 <= ngram_min <= ngram_max. Without a drafter every other option must keep its
// default, since it would otherwise be silently ignored.
inline Result<void> validate(const SpeculativeConfig& c) {
  auto bad = [](const std::string& what) { return Error{ErrorCode::kInvalidArgument, what}; };
  const SpeculativeConfig defaults;
  if (c.drafter == Drafter::kNone) {
    if (c.max_draft_tokens != defaults.max_draft_tokens || c.ngram_max != defaults.ngram_max ||
        c.ngram_min != defaults.ngram_min) {
      return bad("max_draft_tokens, ngram_max and ngram_min tune a speculative drafter, and "
                 "none is chosen: choose one or leave them out");
    }
    return {};
  }
  if (c.max_draft_tokens < 0) {
    return bad("max_draft_tokens must be >= 1 (0 = as many as the model verifies in one "
               "forward), got " + std::to_string(c.max_draft_tokens));
  }
  if (c.ngram_min < 1) {
    return bad("ngram_min must be >= 1 (the shortest n-gram prompt lookup matches), got " +
               std::to_string(c.ngram_min));
  }
  if (c.ngram_max < c.ngram_min) {
    return bad("ngram_max (" + std::to_string(c.ngram_max) + ") must be >= ngram_min (" +
               std::to_string(c.ngram_min) + ")");
  }
  return {};
}

}  // namespace rne::runner

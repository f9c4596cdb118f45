// Drafting with Gemma 4's assistant, the small model Google publishes beside each Gemma 4 size,
// exported into the variant's program as its `draft` method (tools/export_model.py --assistant;
// docs/design.md, "Speculative decoding"). It reads the target's own KV caches and drafts from
// one position: the round's token t at position p, the target's hidden state of the position
// that predicted t, then its own hidden state and the token it just drafted, p unchanged.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "rne/runner/model_session.h"
#include "rne/runner/result.h"

namespace rne::runner {

class AssistantDrafter {
 public:
  // `session` must have a `draft` method (contract().draft_hidden > 0) and outlive this.
  explicit AssistantDrafter(ModelSession& session)
      : session_(session), hidden_(static_cast<size_t>(session.contract().draft_hidden)) {}

  // Remembers row `row` of the latest forward/verify call's hidden states: the position whose
  // logits gave the next round's token. Call it before anything else runs the program.
  void keep(int64_t row) {
    const float* h = session_.hidden_row(row);
    if (h != nullptr) std::copy(h, h + hidden_.size(), hidden_.begin());
  }

  // Up to `max_tokens` greedy drafts continuing `token`, which sits at `position` (the first
  // position not in the cache), from the state keep() saved.
  Result<std::vector<int64_t>> draft(int64_t token, int64_t position, int32_t max_tokens) {
    std::vector<int64_t> drafts;
    std::vector<float> hidden = hidden_;
    for (int32_t i = 0; i < max_tokens; ++i) {
      auto next = session_.draft(token, hidden.data(), position, hidden.data());
      if (!next.ok()) return next.error();
      token = *next;
      drafts.push_back(token);
    }
    return drafts;
  }

 private:
  ModelSession& session_;
  std::vector<float> hidden_;
};

}  // namespace rne::runner

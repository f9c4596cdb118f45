// Prompt-lookup drafting for speculative decoding: the tokens that followed the latest earlier
// occurrence of the context's last n-gram are proposed as its continuation. Needs no second
// model and pays off where answers copy their input (summaries, extraction, edits, JSON that
// repeats the input's keys).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace rne::runner {

// Where an earlier copy of the context's tail is.
struct LookupMatch {
  int64_t from = -1;   // where its continuation starts in the context; -1 when none recurs
  int32_t length = 0;  // how many of the context's last tokens it matched
};

// The longest n-gram, n from `ngram_max` down to `ngram_min`, that ends the context and occurred
// earlier, at its most recent earlier occurrence (recent text predicts the continuation best).
LookupMatch prompt_lookup_match(const std::vector<int64_t>& context, int32_t ngram_min,
                                int32_t ngram_max);

// The round policy: each round drafts as many of the match's continuation tokens as maximize
// the tokens a round is expected to yield per unit of its cost, which may be none (the round is
// then a plain forward). A drafted token continues a copy that already matched `length` tokens
// and, once the drafts before it were kept, `length + i`: the longer the copy so far, the likelier
// the target keeps copying (on SmolLM2's answers, from 25% after 1 token to about 90% after 8).
// Those chances start from that prior and follow what this generation's targets kept.
class PromptLookupDrafter {
 public:
  // `adaptive` false: every token the match offers is drafted, up to draft()'s max_tokens.
  PromptLookupDrafter(int32_t ngram_min, int32_t ngram_max, bool adaptive = true);

  // Up to `max_tokens` tokens continuing `context` (empty: no match, or drafting would not pay).
  std::vector<int64_t> draft(const std::vector<int64_t>& context, int32_t max_tokens);

  // The outcome of the last draft(): the target kept the first `accepted` of its `drafted`.
  void record(int64_t drafted, int64_t accepted);

  // The chance that the target keeps a drafted token that continues a copy of `length` tokens.
  double keep_chance(int32_t length) const;

  // What verify(k) costs against one forward(1): a fixed and a per-token part, measured with
  // rne_bench and in rne_llm's rounds on SmolLM2-135M 8da4w (XNNPACK, 2 cores), where the
  // verified rows' head and sampling make each token dearer than in isolation.
  static double verify_cost(int64_t tokens);

 private:
  // Copies of 8 or more tokens share one estimate.
  static constexpr int32_t kLongest = 8;
  // The prior counts as this many observed drafts of each length.
  static constexpr double kPriorWeight = 4.0;

  int32_t ngram_min_;
  int32_t ngram_max_;
  bool adaptive_;
  int32_t last_length_ = 0;  // the match length of the last draft
  std::array<double, kLongest + 1> drafted_{};
  std::array<double, kLongest + 1> kept_{};
};

}  // namespace rne::runner

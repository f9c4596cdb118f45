#include "rne/runner/prompt_lookup.h"

#include <algorithm>

namespace rne::runner {

LookupMatch prompt_lookup_match(const std::vector<int64_t>& context, int32_t ngram_min,
                                int32_t ngram_max) {
  const auto size = static_cast<int64_t>(context.size());
  for (int64_t n = std::min<int64_t>(ngram_max, size - 1); n >= ngram_min && n >= 1; --n) {
    const auto tail = context.end() - n;
    // `start` is where an earlier copy of the tail begins; it must end before the tail does.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (std::equal(tail, context.end(), context.begin() + start)) {
        return {start + n, static_cast<int32_t>(n)};
      }
    }
  }
  return {};
}

PromptLookupDrafter::PromptLookupDrafter(int32_t ngram_min, int32_t ngram_max, bool adaptive)
    : ngram_min_(ngram_min), ngram_max_(ngram_max), adaptive_(adaptive) {}

double PromptLookupDrafter::verify_cost(int64_t tokens) {
  return tokens <= 1 ? 1.0 : 1.2 + 0.15 * static_cast<double>(tokens - 1);
}

double PromptLookupDrafter::keep_chance(int32_t length) const {
  const auto at = static_cast<size_t>(std::clamp(length, 1, kLongest));
  // The prior, fitted to how often SmolLM2 kept copying after `length` matching tokens.
  const double prior = 1.0 - 0.75 / static_cast<double>(at);
  return (kept_[at] + kPriorWeight * prior) / (drafted_[at] + kPriorWeight);
}

std::vector<int64_t> PromptLookupDrafter::draft(const std::vector<int64_t>& context,
                                                int32_t max_tokens) {
  const LookupMatch match = prompt_lookup_match(context, ngram_min_, ngram_max_);
  if (match.from < 0 || max_tokens < 1) return {};
  const int64_t available = static_cast<int64_t>(context.size()) - match.from;
  const int64_t most = std::min<int64_t>(max_tokens, available);
  // Expected tokens of a round of d drafts: 1 (the target's own) + the chance that the first
  // i drafts are all kept, summed over i. A round without drafts is a plain forward.
  int64_t best = adaptive_ ? 0 : most;
  double best_rate = 1.0 / verify_cost(1);
  double expected = 1.0, all_kept = 1.0;
  for (int64_t d = 1; adaptive_ && d <= most; ++d) {
    all_kept *= keep_chance(match.length + static_cast<int32_t>(d - 1));
    expected += all_kept;
    const double rate = expected / verify_cost(d + 1);
    if (rate > best_rate) {
      best = d;
      best_rate = rate;
    }
  }
  last_length_ = match.length;
  return {context.begin() + match.from, context.begin() + match.from + best};
}

void PromptLookupDrafter::record(int64_t drafted, int64_t accepted) {
  // Drafts past the first rejection were never judged on their own.
  for (int64_t i = 0; i < std::min(drafted, accepted + 1); ++i) {
    const auto at = static_cast<size_t>(
        std::min<int64_t>(last_length_ + i, static_cast<int64_t>(kLongest)));
    drafted_[at] += 1.0;
    kept_[at] += i < accepted ? 1.0 : 0.0;
  }
}

}  // namespace rne::runner

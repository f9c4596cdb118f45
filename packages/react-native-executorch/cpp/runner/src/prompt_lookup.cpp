#include "rne/runner/prompt_lookup.h"

#include <algorithm>

namespace rne::runner {

std::vector<int64_t> prompt_lookup_draft(const std::vector<int64_t>& context, int32_t ngram_min,
                                         int32_t ngram_max, int32_t max_tokens) {
  const auto size = static_cast<int64_t>(context.size());
  for (int64_t n = std::min<int64_t>(ngram_max, size - 1); n >= ngram_min && n >= 1; --n) {
    const auto tail = context.end() - n;
    // The latest occurrence wins: recent text predicts the continuation best. `start` is where
    // an earlier copy of the tail begins; it must end before the tail itself does.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(tail, context.end(), context.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_tokens, size - from);
      return {context.begin() + from, context.begin() + from + count};
    }
  }
  return {};
}

}  // namespace rne::runner

// Prompt-lookup drafting for speculative decoding: the tokens that followed the latest earlier
// occurrence of the context's last n-gram are proposed as its continuation. Needs no second
// model and pays off where answers copy their input (summaries, extraction, edits, JSON that
// repeats the input's keys).
#pragma once

#include <cstdint>
#include <vector>

namespace rne::runner {

// Up to `max_tokens` drafted tokens continuing `context`: for n from `ngram_max` down to
// `ngram_min`, the most recent earlier occurrence of the last n tokens, and what followed it
// (at most up to the end of the context). Empty when no n-gram recurs.
std::vector<int64_t> prompt_lookup_draft(const std::vector<int64_t>& context, int32_t ngram_min,
                                         int32_t ngram_max, int32_t max_tokens);

}  // namespace rne::runner

// Picks the next token from a logits row. Designed for large vocabularies (262144 for Gemma):
// every filter is a few vectorisable linear passes plus work on a small candidate set; nothing
// sorts the whole row.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "rne/runner/result.h"
#include "rne/grammar/token_constraint.h"

namespace rne::runner {

// The mask Sampler::sample takes, a grammar constraint's (rne/grammar/token_constraint.h).
using grammar::TokenMask;

struct SamplerConfig {
  float temperature = 0.0f;         // <= 0: greedy (argmax); otherwise logits / temperature
  int32_t top_k = 0;                // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;               // keep the smallest set whose mass reaches top_p; 1 = off
  float min_p = 0.0f;               // drop tokens with p < min_p * p_max; 0 = off
  float repetition_penalty = 1.0f;  // HF/CTRL rule on tokens seen in the context; 1 = off
  uint64_t seed = 0;                // seeds the generator; same seed + inputs = same tokens
};

// Checks ranges (temperature >= 0, top_k >= 0, 0 < top_p <= 1, 0 <= min_p < 1, penalty > 0).
Result<void> validate(const SamplerConfig& config);

class Sampler {
 public:
  Sampler(const SamplerConfig& config, int64_t vocab_size);

  // Returns the chosen token id. `logits` (length vocab_size) is modified in place by the
  // repetition penalty. `context` holds the ids the penalty applies to (prompt + generated).
  // With `allowed` (a grammar's mask, which must allow at least one id) every other token's
  // logit becomes -inf first, so the filters and the draw only ever see allowed tokens.
  int64_t sample(float* logits, const std::vector<int64_t>& context,
                 const TokenMask* allowed = nullptr);

 private:
  struct Candidate {
    float value;  // a logit during top-k selection, then a weight relative to the top token
    int32_t id;
  };
  void apply_repetition_penalty(float* logits, const std::vector<int64_t>& context);
  int64_t sample_unmasked(float* logits);
  // Top-k path: candidates_ = the k largest logits turned into weights, descending.
  float weigh_top_k(const float* logits, float inv_t);
  // Full-vocabulary path: weights_ (and block_sums_) for every token; returns their total.
  float weigh_vocabulary(const float* logits, float inv_t);
  int64_t draw_from_vocabulary(float total);
  // candidates_ = the shortest heaviest-first prefix of the tokens with weight >= min_weight
  // whose mass reaches `need`, or all of those tokens when their mass falls short (any order).
  void select_nucleus(float need, float min_weight);
  void collect_at_least(float threshold);
  int64_t draw_from_candidates(size_t count);

  SamplerConfig config_;
  int64_t vocab_size_;
  std::mt19937_64 rng_;
  // Reused between calls: no allocation per token.
  std::vector<Candidate> candidates_;
  std::vector<float> weights_;
  std::vector<float> block_sums_;       // weights_ summed per block: a draw skips whole blocks
  std::vector<float> mass_by_bin_;      // weights_ mass per bin of their float exponent
  std::vector<uint32_t> penalized_at_;  // per id: the call that last penalized it (dedup)
  uint32_t call_ = 0;
};

}  // namespace rne::runner

// The hook through which a grammar restricts generation: before each sampling step the
// generator asks the constraint which tokens may come next, the sampler gives every other token
// a logit of -inf (before the penalty, temperature, top-k, top-p and min-p), and the chosen
// token is fed back. The generator also says how many tokens it may still sample, so that a
// constraint can finish its output within that budget (the max_new_tokens or the KV cache left).
// JsonSchemaConstraint (json_constraint.h) is the implementation.
#pragma once

#include <cstdint>
#include <vector>

#include "rne/grammar/result.h"

namespace rne::grammar {

// One bit per vocabulary id: set = the token may be sampled.
struct TokenMask {
  std::vector<uint64_t> words;

  void resize(int64_t vocab_size) { words.assign(static_cast<size_t>((vocab_size + 63) / 64), 0); }
  void allow(int64_t id) { words[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
  void disallow(int64_t id) { words[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63)); }
  bool allows(int64_t id) const {
    return (words[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
  }
  bool empty() const {
    for (uint64_t w : words) {
      if (w != 0) return false;
    }
    return true;
  }
};

// The tokens of a cached walk that fit a budget. `allowed`: the tokens the grammar takes from
// the current state; `resizing`: those of them after which the shortest completion grows or
// shrinks, by `change` bytes ({token, change} items), the largest growth being `max_growth`;
// `slack`: the bytes the completion may still grow by. With slack >= 0 every allowed token
// fits except those that grow the completion by more than it; with slack < 0 only tokens that
// shrink the completion by at least -slack do. Fills `mask` (sized to the vocabulary and, for
// slack < 0, cleared by the caller).
template <typename Resizing>
void mask_within_budget(const TokenMask& allowed, const std::vector<Resizing>& resizing,
                        int64_t max_growth, int64_t slack, TokenMask& mask) {
  if (slack >= 0) {
    mask.words = allowed.words;
    if (max_growth > slack) {
      for (const Resizing& token : resizing) {
        if (token.change > slack) mask.disallow(token.token);
      }
    }
  } else {
    for (const Resizing& token : resizing) {
      if (token.change <= slack) mask.allow(token.token);
    }
  }
}

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // The fewest tokens, EOS included, in which the output can be finished from here. The
  // generator refuses to start when its budget is smaller.
  virtual int64_t min_tokens() const = 0;
  // The tokens that may come next (valid until the next call), given that `remaining` tokens,
  // this one included, may still be sampled: a constraint keeps enough of them to finish. An
  // error when none may, or when the constraint cannot be evaluated.
  virtual Result<const TokenMask*> allowed(int64_t remaining) = 0;
  // Advances past the sampled token; an error if the token was not allowed.
  virtual Result<void> accept(int64_t token) = 0;
};

}  // namespace rne::grammar

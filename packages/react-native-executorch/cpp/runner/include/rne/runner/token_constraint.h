// The hook through which a grammar restricts generation: before each sampling step the
// generator asks the constraint which tokens may come next, the sampler gives every other token
// a logit of -inf (before the penalty, temperature, top-k, top-p and min-p), and the chosen
// token is fed back. JsonSchemaConstraint (json_constraint.h) is the implementation.
#pragma once

#include <cstdint>
#include <vector>

#include "rne/runner/result.h"

namespace rne::runner {

// One bit per vocabulary id: set = the token may be sampled.
struct TokenMask {
  std::vector<uint64_t> words;

  void resize(int64_t vocab_size) { words.assign(static_cast<size_t>((vocab_size + 63) / 64), 0); }
  void allow(int64_t id) { words[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
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

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // The tokens that may come next (valid until the next call). An error when none may, or
  // when the constraint cannot be evaluated.
  virtual Result<const TokenMask*> allowed() = 0;
  // Advances past the sampled token; an error if the token was not allowed.
  virtual Result<void> accept(int64_t token) = 0;
};

}  // namespace rne::runner

// tokenizer.json "normalizer": string rewrites applied to each piece of text between added
// tokens before pre-tokenization (Gemma: Replace " " -> "▁").
#pragma once

#include <memory>
#include <string>

#include "rne/json/json.h"
#include "rne/tokenizer/result.h"

namespace rne::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void apply(std::string& text) const = 0;
  // Steps, nested Sequences included, and the most bytes one input byte can become: load-time
  // bounds (kMaxPipelineSteps, kMaxPipelineGrowth).
  virtual size_t steps() const { return 1; }
  virtual double growth() const { return 1; }
};

// nullptr for a null/absent normalizer. A chain over the limits of config.h is an error.
Result<std::unique_ptr<Normalizer>> make_normalizer(const json::Value& config,
                                                    const std::string& path);

}  // namespace rne::tokenizer

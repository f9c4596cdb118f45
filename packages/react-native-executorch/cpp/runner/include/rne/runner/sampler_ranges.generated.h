// GENERATED FILE: do not edit. Source: packages/react-native-executorch/cpp/runner/sampler_options.yaml.
// Regenerate with: .venv/bin/python tools/gen_registry.py
#pragma once

#include <array>
#include <limits>

#include "rne/runner/sampler.h"

namespace rne::runner {

// A finite value with low <(=) value <(=) high, an integer where `integer`.
struct SamplerRange {
  const char* name;  // the SamplerConfig field
  bool integer;
  double low;
  bool low_inclusive;
  double high;  // +infinity: no upper bound
  bool high_inclusive;
  const char* range;  // the range as errors say it ("in (0, 1]")
  const char* off;  // what the off value does ("1 = off")
};

inline constexpr std::array<SamplerRange, 5> kSamplerRanges{{
    {"temperature", false, 0.0, true, std::numeric_limits<double>::infinity(), true, ">= 0", "0 = greedy"},
    {"top_k", true, 0.0, true, std::numeric_limits<double>::infinity(), true, ">= 0", "0 = off"},
    {"top_p", false, 0.0, false, 1.0, true, "in (0, 1]", "1 = off"},
    {"min_p", false, 0.0, true, 1.0, false, "in [0, 1)", "0 = off"},
    {"repetition_penalty", false, 0.0, false, std::numeric_limits<double>::infinity(), true, "> 0", "1 = off"},
}};

// The options' values, in kSamplerRanges' order.
inline std::array<double, 5> sampler_values(const SamplerConfig& config) {
  return {{
      static_cast<double>(config.temperature),
      static_cast<double>(config.top_k),
      static_cast<double>(config.top_p),
      static_cast<double>(config.min_p),
      static_cast<double>(config.repetition_penalty),
  }};
}

}  // namespace rne::runner

// Every option as X(SamplerConfig field, JavaScript name), for the tables that take each
// of them (the seam's generation options).
#define RNE_SAMPLER_OPTIONS(X) \
  X(temperature, "temperature") \
  X(top_k, "topK") \
  X(top_p, "topP") \
  X(min_p, "minP") \
  X(repetition_penalty, "repetitionPenalty")

// What the speculative-decoding tests (speculative_test.cpp, assistant_drafter_test.cpp) share:
// loading the program ctest's fixture exported, and one greedy or sampled run's tokens and stats.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "rne/runner/model_session.h"
#include "rne/runner/text_generator.h"

namespace rne::runner::testing {

// The program at the path in environment variable `env`; nullptr (and a test failure) when the
// variable is unset or the program does not load.
inline std::unique_ptr<ModelSession> load_from_env(const char* env) {
  const char* path = std::getenv(env);
  if (path == nullptr) {
    ADD_FAILURE() << env << " is not set: run these tests through ctest (its fixtures export "
                  << "the models)";
    return nullptr;
  }
  auto session = ModelSession::load(path);
  if (!session.ok()) {
    ADD_FAILURE() << session.error().message;
    return nullptr;
  }
  return std::move(session).value();
}

struct Generated {
  std::vector<int64_t> tokens;
  Stats stats;
};

inline Generated generate(TextGenerator& g, const std::vector<int64_t>& prompt,
                          const GenerationConfig& c) {
  Generated run;
  auto stats = g.generate_prompt(prompt, c, [&](int64_t t) {
    run.tokens.push_back(t);
    return true;
  });
  EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message);
  if (stats.ok()) run.stats = *stats;
  return run;
}

}  // namespace rne::runner::testing

// Speculative decoding with Gemma 4's assistant drafter (the program's `draft` method, exported
// by tools/export_model.py --assistant) on the tiny random Gemma 4 with a tiny random assistant:
// greedy output equals plain decoding token for token, across ring wraps and turns, and a
// program without the method refuses the drafter and keeps its conversation. CTest's fixtures
// pass RNE_TEST_PTE_ASSISTANT_GEMMA4 and (a program with `verify` only) RNE_TEST_PTE_VERIFY_GEMMA4.
// The assistant's proposals against transformers' are tests/export/test_gemma4_assistant.py.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rne/runner/assistant_drafter.h"
#include "rne/runner/model_session.h"
#include "rne/runner/text_generator.h"
#include "speculative_test_support.h"

namespace rne::runner {
namespace {

using testing::generate;
using testing::Generated;

std::unique_ptr<ModelSession> load(const char* env) { return testing::load_from_env(env); }

std::vector<int64_t> prompt_of(int64_t length, int64_t salt, const ModelContract& c) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < length; ++i) ids.push_back(3 + (i * 29 + salt * 53) % (c.vocab_size - 3));
  return ids;
}

GenerationConfig config(int32_t max_new_tokens, int32_t max_draft) {
  GenerationConfig c;
  c.max_new_tokens = max_new_tokens;
  c.stop_on_eos = false;
  if (max_draft > 0) {
    c.speculative.drafter = Drafter::kAssistant;
    c.speculative.max_draft_tokens = max_draft;
  }
  return c;
}

TEST(AssistantDrafter, ProgramDeclaresTheDraftMethod) {
  auto session = load("RNE_TEST_PTE_ASSISTANT_GEMMA4");
  ASSERT_TRUE(session);
  // The tiny Gemma 4's width: the hidden state the assistant drafts from.
  EXPECT_EQ(session->contract().draft_hidden, 64);
  EXPECT_EQ(session->contract().max_verify, 5);
}

TEST(AssistantDrafter, DraftsReadTheCachesForwardWrote) {
  // The same token and hidden state after two different prompts of the same length: the draft
  // attends over what forward wrote, so its proposals differ (a draft method with its own copy
  // of the caches would see zeros both times and propose the same).
  auto session = load("RNE_TEST_PTE_ASSISTANT_GEMMA4");
  ASSERT_TRUE(session);
  const ModelContract& c = session->contract();
  std::vector<std::vector<int64_t>> proposals;
  for (int64_t salt : {1, 2}) {
    const auto prompt = prompt_of(5, salt, c);
    ASSERT_TRUE(session->forward(prompt.data(), 5, 0).ok());
    AssistantDrafter drafter(*session);
    drafter.keep(0);
    auto drafts = drafter.draft(7, 5, 4);
    ASSERT_TRUE(drafts.ok()) << drafts.error().message;
    proposals.push_back(*drafts);
  }
  EXPECT_NE(proposals[0], proposals[1]);
}

TEST(AssistantDrafter, GreedyIdentityAcrossRingWrapsAndTurns) {
  auto plain_session = load("RNE_TEST_PTE_ASSISTANT_GEMMA4");
  auto fast_session = load("RNE_TEST_PTE_ASSISTANT_GEMMA4");
  ASSERT_TRUE(plain_session && fast_session);
  TextGenerator plain(std::move(plain_session));
  TextGenerator fast(std::move(fast_session));
  const ModelContract& c = fast.contract();
  int64_t drafted = 0, accepted = 0;
  // Window 6, chunks of 6, 64 positions: prompts shorter than the window and several windows
  // long; the rings wrap over prompt and answer.
  for (int64_t length : {3, 17}) {
    for (int32_t draft : {1, 2, static_cast<int32_t>(c.max_verify - 1)}) {
      const auto prompt = prompt_of(length, draft, c);
      plain.reset();
      fast.reset();
      const Generated want = generate(plain, prompt, config(24, 0));
      const Generated got = generate(fast, prompt, config(24, draft));
      ASSERT_EQ(got.tokens, want.tokens) << "prompt of " << length << ", drafts of " << draft;
      EXPECT_LE(got.stats.drafted_tokens, got.stats.decode_forwards * draft);
      drafted += got.stats.drafted_tokens;
      accepted += got.stats.accepted_tokens;
      // The next turn continues from the cache: rejected drafts left no trace.
      auto next = prompt;
      next.insert(next.end(), want.tokens.begin(), want.tokens.end());
      next.insert(next.end(), prompt.begin(), prompt.begin() + 2);
      const Generated fast_turn = generate(fast, next, config(10, draft));
      plain.reset();
      const Generated plain_turn = generate(plain, next, config(10, 0));
      ASSERT_EQ(fast_turn.tokens, plain_turn.tokens) << "second turn, drafts of " << draft;
    }
  }
  EXPECT_GT(drafted, 0);
  // Random weights: the assistant rarely agrees with the target (printed, not asserted).
  std::printf("assistant drafts: %lld drafted, %lld accepted\n", static_cast<long long>(drafted),
              static_cast<long long>(accepted));
}

TEST(AssistantDrafter, ProgramWithoutDraftRefusesAndKeepsTheConversation) {
  auto session = load("RNE_TEST_PTE_VERIFY_GEMMA4");
  ASSERT_TRUE(session);
  EXPECT_EQ(session->contract().draft_hidden, 0);
  TextGenerator g(std::move(session));
  const auto prompt = prompt_of(4, 0, g.contract());
  ASSERT_TRUE(g.prefill(prompt).ok());
  auto refused = g.generate({9}, config(5, 2), [](int64_t) { return true; });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--assistant"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(g.cached_tokens(), prompt);
}

}  // namespace
}  // namespace rne::runner

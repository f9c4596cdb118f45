// Speculative decoding (TextGenerator with a drafter) on real .pte files that carry a `verify`
// method, exported by tools/export_model.py --verify-tokens: a tiny random Llama (flat caches)
// and a tiny random Gemma 4 (ring caches on its sliding layers). Greedy output must equal plain
// decoding token for token; sampled output must keep the target's distribution. CTest's
// fixtures pass the paths in RNE_TEST_PTE_VERIFY_LLAMA, RNE_TEST_PTE_VERIFY_GEMMA4 and (a
// program without `verify`) RNE_TEST_PTE_CHUNKED.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "rne/runner/model_session.h"
#include "rne/runner/prompt_lookup.h"
#include "rne/runner/text_generator.h"
#include "speculative_test_support.h"

namespace rne::runner {
namespace {

using testing::generate;
using testing::Generated;

std::unique_ptr<TextGenerator> open(const char* env) {
  auto session = testing::load_from_env(env);
  return session ? std::make_unique<TextGenerator>(std::move(session)) : nullptr;
}

// A prompt whose second half repeats its first, so n-grams recur and prompt lookup drafts.
std::vector<int64_t> repeating_prompt(int64_t half, const ModelContract& c, int64_t salt) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < half; ++i) {
    int64_t id = (i * 37 + salt * 101 + 5) % c.vocab_size;
    while (std::find(c.eos_ids.begin(), c.eos_ids.end(), id) != c.eos_ids.end()) {
      id = (id + 1) % c.vocab_size;
    }
    ids.push_back(id);
  }
  ids.insert(ids.end(), ids.begin(), ids.begin() + half);
  return ids;
}

GenerationConfig config(int32_t max_new_tokens, int32_t max_draft) {
  GenerationConfig c;
  c.max_new_tokens = max_new_tokens;
  c.stop_on_eos = false;
  if (max_draft > 0) {
    c.speculative.drafter = Drafter::kPromptLookup;
    c.speculative.max_draft_tokens = max_draft;
    // Random weights repeat single tokens, not phrases: drafting every token of 1-gram matches
    // keeps the tests speculating often, where the round policy would not (their copies are
    // seldom kept).
    c.speculative.ngram_min = 1;
    c.speculative.adaptive_draft_length = false;
  }
  return c;
}

TEST(PromptLookup, MatchesTheLatestOccurrenceOfTheLongestNgram) {
  // The 2-gram (7, 8) occurs twice before the end; the latest occurrence wins.
  const std::vector<int64_t> context{7, 8, 1, 2, 7, 8, 3, 4, 5, 7, 8};
  const LookupMatch match = prompt_lookup_match(context, 1, 3);
  EXPECT_EQ(match.from, 6);
  EXPECT_EQ(match.length, 2);
  // Nothing recurs.
  EXPECT_EQ(prompt_lookup_match({1, 2, 3}, 1, 3).from, -1);
  // A 1-gram when allowed; too short an n-gram is not looked for.
  EXPECT_EQ(prompt_lookup_match({4, 9, 4}, 1, 3).from, 1);
  EXPECT_EQ(prompt_lookup_match({4, 9, 4}, 2, 3).from, -1);
  // The longest n-gram wins over a more recent shorter one.
  const LookupMatch longest = prompt_lookup_match({1, 2, 3, 9, 3, 5, 3, 1, 2, 3}, 1, 3);
  EXPECT_EQ(longest.from, 3);
  EXPECT_EQ(longest.length, 3);
}

// A context whose tail (1, 2, 3) recurred once, followed by 10 .. 17.
std::vector<int64_t> copyable_context() {
  std::vector<int64_t> context{1, 2, 3};
  for (int64_t id = 10; id < 18; ++id) context.push_back(id);
  context.insert(context.end(), {50, 1, 2, 3});
  return context;
}

TEST(PromptLookup, DraftsAsFarAsACopyIsLikelyToBeKept) {
  const auto context = copyable_context();
  PromptLookupDrafter drafter(2, 3);
  const auto draft = drafter.draft(context, 7);
  // A 3-token copy is likely enough to be kept that drafting pays: what followed it, in order.
  ASSERT_FALSE(draft.empty());
  EXPECT_EQ(draft, std::vector<int64_t>(context.begin() + 3, context.begin() + 3 + draft.size()));
  EXPECT_LE(draft.size(), 7U);
  // The cap, and the end of the context, bound it.
  EXPECT_LE(drafter.draft(context, 1).size(), 1U);
  EXPECT_TRUE(drafter.draft(context, 0).empty());
  // Long copies are likelier kept than short ones.
  EXPECT_GT(drafter.keep_chance(6), drafter.keep_chance(2));
}

TEST(PromptLookup, DraftLengthFollowsWhatTheTargetKept) {
  const auto context = copyable_context();
  PromptLookupDrafter kept(2, 3), rejected(2, 3);
  const size_t first = kept.draft(context, 7).size();
  ASSERT_GT(first, 0U);
  for (int round = 0; round < 20; ++round) {
    const auto all = kept.draft(context, 7);
    kept.record(static_cast<int64_t>(all.size()), static_cast<int64_t>(all.size()));
    const auto some = rejected.draft(context, 7);
    if (!some.empty()) rejected.record(static_cast<int64_t>(some.size()), 0);
  }
  // Copies the target kept draft the whole continuation; copies it rejected stop drafting, so
  // the rounds are plain forwards again.
  EXPECT_EQ(kept.draft(context, 7).size(), 7U);
  EXPECT_TRUE(rejected.draft(context, 7).empty());
  EXPECT_GT(kept.keep_chance(3), rejected.keep_chance(3));
}

// Greedy decoding with drafts equals greedy decoding without, token for token, for every draft
// length; and the drafts did something (accepted, fewer forwards than tokens).
void expect_greedy_identity(const char* env, int64_t half, int32_t new_tokens) {
  auto plain = open(env);
  auto fast = open(env);
  ASSERT_TRUE(plain && fast);
  const ModelContract& c = fast->contract();
  ASSERT_GE(c.max_verify, 2) << "the fixture must export a verify method";
  int64_t accepted = 0, forwards = 0, generated = 0;
  for (int64_t salt = 0; salt < 4; ++salt) {
    const auto prompt = repeating_prompt(half, c, salt);
    plain->reset();
    const Generated want = generate(*plain, prompt, config(new_tokens, 0));
    for (int32_t draft : {1, 3, static_cast<int32_t>(c.max_verify - 1)}) {
      fast->reset();
      const Generated got = generate(*fast, prompt, config(new_tokens, draft));
      ASSERT_EQ(got.tokens, want.tokens) << "salt " << salt << ", drafts of " << draft;
      EXPECT_LE(got.stats.accepted_tokens, got.stats.drafted_tokens);
      accepted += got.stats.accepted_tokens;
      forwards += got.stats.decode_forwards;
      generated += static_cast<int64_t>(got.tokens.size()) - 1;
      // The conversation continues from the cache exactly: rejected drafts left no trace.
      auto next = prompt;
      next.insert(next.end(), want.tokens.begin(), want.tokens.end());
      next.insert(next.end(), prompt.begin(), prompt.begin() + 3);
      const Generated fast_turn = generate(*fast, next, config(new_tokens / 2, draft));
      EXPECT_GT(fast_turn.stats.reused_tokens, static_cast<int64_t>(prompt.size()));
      plain->reset();
      const Generated plain_turn = generate(*plain, next, config(new_tokens / 2, 0));
      ASSERT_EQ(fast_turn.tokens, plain_turn.tokens) << "second turn, salt " << salt;
    }
    // The round policy's own draft lengths (it may draft none): the same tokens.
    GenerationConfig adaptive = config(new_tokens, static_cast<int32_t>(c.max_verify - 1));
    adaptive.speculative.adaptive_draft_length = true;
    fast->reset();
    ASSERT_EQ(generate(*fast, prompt, adaptive).tokens, want.tokens) << "salt " << salt;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(forwards, generated) << "speculation never saved a forward call";
}

TEST(Speculative, GreedyIdentityOnFlatCaches) {
  expect_greedy_identity("RNE_TEST_PTE_VERIFY_LLAMA", 20, 60);
}

TEST(Speculative, GreedyIdentityAcrossRingWraps) {
  // Window 5, 64 positions: the rings wrap many times over prompt and answer.
  expect_greedy_identity("RNE_TEST_PTE_VERIFY_GEMMA4", 8, 30);
}

// Upper quantile of the chi-square distribution (Wilson-Hilferty), z = 3.29: p = 0.0005.
double chi_square_bound(int df) {
  const double k = df, z = 3.29;
  const double t = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

// Sampling with drafts keeps the target's distribution: the joint distribution of the second
// and third sampled tokens (the first ones drafts can touch) over many seeds, with and without
// speculation, passes a chi-square test of homogeneity. Keeping every draft instead would move
// mass onto the drafted tokens and fail it.
TEST(Speculative, SamplingKeepsTheTargetDistribution) {
  auto g = open("RNE_TEST_PTE_VERIFY_LLAMA");
  ASSERT_TRUE(g);
  // Every id of the vocabulary once, so whatever is sampled first recurs in the context and
  // prompt lookup always drafts what followed it.
  const ModelContract& contract = g->contract();
  std::vector<int64_t> prompt;
  for (int64_t id = 0; id < contract.vocab_size; ++id) {
    if (std::find(contract.eos_ids.begin(), contract.eos_ids.end(), id) == contract.eos_ids.end()) {
      prompt.push_back(id);
    }
  }
  std::shuffle(prompt.begin(), prompt.end(), std::mt19937_64(7));
  // Then the model's own greedy continuation: what it samples next recurs there, and the
  // drafts copied from it are often its own likely tokens, so many are kept.
  const Generated greedy_tail = generate(*g, prompt, config(40, 0));
  prompt.insert(prompt.end(), greedy_tail.tokens.begin(), greedy_tail.tokens.end());
  ASSERT_LT(static_cast<int64_t>(prompt.size()) + 4, contract.max_context);
  const int kRuns = 1500;
  std::map<int64_t, int> counts[2];
  int64_t drafted = 0, accepted = 0;
  for (int mode = 0; mode < 2; ++mode) {
    for (int seed = 0; seed < kRuns; ++seed) {
      GenerationConfig c = config(3, mode == 1 ? 4 : 0);
      c.sampling.temperature = 0.8f;
      c.sampling.top_k = 8;
      c.sampling.seed = static_cast<uint64_t>(seed) + (mode == 1 ? 1000003u : 0u);
      // The prompt stays cached: each run rewinds to it and feeds its last token again.
      const Generated run = generate(*g, prompt, c);
      ASSERT_EQ(run.tokens.size(), 3u);
      counts[mode][run.tokens[1] * g->contract().vocab_size + run.tokens[2]] += 1;
      drafted += run.stats.drafted_tokens;
      accepted += run.stats.accepted_tokens;
    }
  }
  ASSERT_GE(drafted, kRuns) << "the prompt must make prompt lookup draft";
  ASSERT_GT(accepted, 50) << "too few drafts kept for the test to mean anything";
  // Categories with few counts are pooled so every expected count is at least 5.
  double chi = 0;
  int df = -1;
  int pooled[2] = {0, 0};
  std::map<int64_t, int> keys;
  for (int mode = 0; mode < 2; ++mode) {
    for (const auto& [key, n] : counts[mode]) keys[key] += n;
  }
  auto add = [&](int a, int b) {
    const double total = a + b, expected = total / 2.0;
    chi += (a - expected) * (a - expected) / expected + (b - expected) * (b - expected) / expected;
    ++df;
  };
  for (const auto& [key, total] : keys) {
    if (total < 10) {
      pooled[0] += counts[0][key];
      pooled[1] += counts[1][key];
      continue;
    }
    add(counts[0][key], counts[1][key]);
  }
  if (pooled[0] + pooled[1] >= 10) add(pooled[0], pooled[1]);
  ASSERT_GE(df, 3) << "too few categories for the test to mean anything";
  std::printf("sampling homogeneity: chi2 %.1f on %d df (bound %.1f); drafted %lld, accepted "
              "%lld\n", chi, df, chi_square_bound(df), static_cast<long long>(drafted),
              static_cast<long long>(accepted));
  EXPECT_LT(chi, chi_square_bound(df));
}

TEST(Speculative, BadRequestsAreRefusedBeforeTheCacheChanges) {
  auto g = open("RNE_TEST_PTE_VERIFY_LLAMA");
  auto old = open("RNE_TEST_PTE_CHUNKED");
  ASSERT_TRUE(g && old);
  const auto prompt = repeating_prompt(10, g->contract(), 1);
  generate(*g, prompt, config(8, 0));
  const auto cached = g->cached_tokens();
  auto refused = [&](TextGenerator& gen, const GenerationConfig& c, const std::string& says) {
    auto stats = gen.generate({5, 6}, c, [](int64_t) { return true; });
    ASSERT_FALSE(stats.ok());
    EXPECT_NE(stats.error().message.find(says), std::string::npos) << stats.error().message;
  };
  GenerationConfig c = config(8, 0);
  c.speculative.drafter = Drafter::kPromptLookup;
  c.speculative.max_draft_tokens = static_cast<int32_t>(g->contract().max_verify);
  refused(*g, c, "max_draft_tokens");
  c.speculative.max_draft_tokens = -1;
  refused(*g, c, "max_draft_tokens");
  c.speculative.max_draft_tokens = 2;
  c.speculative.ngram_min = 0;
  refused(*g, c, "ngram_m");
  c.speculative.ngram_min = 3;
  c.speculative.ngram_max = 2;
  refused(*g, c, "ngram_m");
  c.speculative = {};
  c.speculative.drafter = Drafter::kAssistant;
  refused(*g, c, "assistant");
  EXPECT_EQ(g->cached_tokens(), cached) << "a refused request changed the conversation";
  // A program exported without verify names the re-export.
  refused(*old, config(8, 3), "--verify-tokens");
  EXPECT_EQ(old->position(), 0);
}

}  // namespace
}  // namespace rne::runner

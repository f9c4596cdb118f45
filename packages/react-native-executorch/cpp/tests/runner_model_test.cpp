// The generation loop on real .pte files exported by tools/export_model.py (the same tiny
// random-weight Llama twice: one file whose max_chunk covers every prompt here, one with a
// small max_chunk). CTest's export fixture writes them and passes their paths in
// RNE_TEST_PTE_ONESHOT and RNE_TEST_PTE_CHUNKED.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rne/grammar/json_constraint.h"
#include "rne/runner/llm_runner.h"
#include "rne/runner/model_file.h"
#include "rne/runner/model_session.h"
#include "rne/runner/text_generator.h"

namespace rne::runner {
namespace {

std::string env_path(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::unique_ptr<TextGenerator> open(const char* env) {
  const std::string path = env_path(env);
  if (path.empty()) {
    ADD_FAILURE() << env << " is not set: run these tests through ctest (its fixture exports "
                  << "the models) or set it to a .pte written by tools/export_model.py";
    return nullptr;
  }
  auto session = ModelSession::load(path);
  if (!session.ok()) {
    ADD_FAILURE() << session.error().message;
    return nullptr;
  }
  return std::make_unique<TextGenerator>(std::move(session).value());
}

// Deterministic prompt of `n` ids inside the vocabulary, avoiding the EOS ids.
std::vector<int64_t> prompt(int64_t n, const ModelContract& c, int64_t salt = 0) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = (i * 37 + salt * 101 + 5) % c.vocab_size;
    while (std::find(c.eos_ids.begin(), c.eos_ids.end(), id) != c.eos_ids.end()) id = (id + 1) % c.vocab_size;
    ids.push_back(id);
  }
  return ids;
}

GenerationConfig greedy(int32_t max_new_tokens, bool stop_on_eos = true) {
  GenerationConfig config;
  config.max_new_tokens = max_new_tokens;
  config.stop_on_eos = stop_on_eos;
  return config;
}

struct Generated {
  std::vector<int64_t> tokens;
  Stats stats;
};

Generated generate(TextGenerator& g, const std::vector<int64_t>& input, const GenerationConfig& config) {
  Generated run;
  auto stats = g.generate(input, config, [&](int64_t t) {
    run.tokens.push_back(t);
    return true;
  });
  EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message);
  if (stats.ok()) run.stats = *stats;
  return run;
}

std::vector<float> prefill_logits(TextGenerator& g, const std::vector<int64_t>& input) {
  g.reset();
  auto stats = g.prefill(input);
  EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message);
  const LogitsView view = g.last_logits();
  return std::vector<float>(view.data, view.data + view.size);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

class RunnerModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    oneshot_ = open("RNE_TEST_PTE_ONESHOT");
    chunked_ = open("RNE_TEST_PTE_CHUNKED");
    ASSERT_TRUE(oneshot_ && chunked_);
  }
  std::unique_ptr<TextGenerator> oneshot_, chunked_;
};

TEST_F(RunnerModelTest, ContractComesFromTheFile) {
  const auto& a = oneshot_->contract();
  const auto& b = chunked_->contract();
  EXPECT_GT(a.max_chunk, b.max_chunk);
  EXPECT_EQ(a.max_context, b.max_context);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_FALSE(a.eos_ids.empty());
  // The fixture exports the one-shot file with a chunk that covers 3 small chunks + 1.
  EXPECT_GE(a.max_chunk, 3 * b.max_chunk + 1);
}

TEST_F(RunnerModelTest, ChunkedPrefillGivesTheOneShotNextTokenLogits) {
  const int64_t chunk = chunked_->contract().max_chunk;
  for (int64_t n : {int64_t{1}, chunk - 1, chunk, chunk + 1, 3 * chunk - 1, 3 * chunk, 3 * chunk + 1}) {
    const auto ids = prompt(n, chunked_->contract());
    const auto reference = prefill_logits(*oneshot_, ids);
    const auto chunked = prefill_logits(*chunked_, ids);
    EXPECT_EQ(chunked_->position(), n);
    EXPECT_LT(max_abs_diff(reference, chunked), 1e-4f) << "prompt length " << n;
    // Same greedy continuation, too.
    oneshot_->reset();
    chunked_->reset();
    EXPECT_EQ(generate(*oneshot_, ids, greedy(6, false)).tokens,
              generate(*chunked_, ids, greedy(6, false)).tokens)
        << "prompt length " << n;
  }
}

TEST_F(RunnerModelTest, MaxNewTokensBoundsTheAnswer) {
  const auto run = generate(*chunked_, prompt(5, chunked_->contract()), greedy(7, false));
  EXPECT_EQ(run.tokens.size(), 7u);
  EXPECT_EQ(run.stats.generated_tokens, 7);
  EXPECT_EQ(run.stats.stop_reason, StopReason::kMaxNewTokens);
  EXPECT_EQ(run.stats.cache_tokens, 5 + 6);  // the 7th token is not fed yet
}

TEST_F(RunnerModelTest, BudgetRunsToTheEndOfTheContextNotToMaxChunk) {
  // Unbounded max_new_tokens on a small-chunk file: generation must fill the context.
  const auto& c = chunked_->contract();
  const int64_t n = 2 * c.max_chunk + 3;
  const auto run = generate(*chunked_, prompt(n, c), greedy(0, false));
  EXPECT_EQ(run.stats.generated_tokens, c.max_context - n);
  EXPECT_EQ(run.stats.stop_reason, StopReason::kContextFull);
  EXPECT_EQ(chunked_->position(), c.max_context - 1);
}

TEST_F(RunnerModelTest, ContextEndCapsMaxNewTokensAndAFullCacheIsAClearError) {
  const auto& c = chunked_->contract();
  const auto run = generate(*chunked_, prompt(c.max_context - 3, c), greedy(100, false));
  EXPECT_EQ(run.stats.generated_tokens, 3);
  EXPECT_EQ(run.stats.stop_reason, StopReason::kContextFull);

  // The cache now has 1 free position, taken by the pending last token: no room for more.
  auto more = chunked_->generate(prompt(1, c), greedy(5), [](int64_t) { return true; });
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.error().code, ErrorCode::kContextFull);
  EXPECT_NE(more.error().message.find("reset()"), std::string::npos) << more.error().message;

  chunked_->reset();
  auto too_long = chunked_->generate(prompt(c.max_context + 1, c), greedy(1), [](int64_t) { return true; });
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, ErrorCode::kContextFull);
  EXPECT_EQ(chunked_->position(), 0);  // nothing was fed
}

TEST_F(RunnerModelTest, InterruptFromAnotherThreadStopsAfterTheCurrentToken) {
  std::atomic<int> seen{0};
  std::atomic<bool> sent{false};
  std::thread other([&] {
    while (seen.load() < 3) std::this_thread::yield();
    chunked_->interrupt();
    sent.store(true);
  });
  Generated run;
  auto stats = chunked_->generate(prompt(4, chunked_->contract()), greedy(50, false),
                                  [&](int64_t t) {
                                    run.tokens.push_back(t);
                                    if (++seen == 3) {
                                      while (!sent.load()) std::this_thread::yield();
                                    }
                                    return true;
                                  });
  other.join();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->stop_reason, StopReason::kInterrupted);
  EXPECT_EQ(stats->generated_tokens, 3);
  EXPECT_EQ(run.tokens.size(), 3u);
  // The flag does not leak into the next call, and the conversation continues consistently.
  const auto next = generate(*chunked_, prompt(2, chunked_->contract(), 1), greedy(4, false));
  EXPECT_EQ(next.stats.generated_tokens, 4);
  EXPECT_EQ(next.stats.stop_reason, StopReason::kMaxNewTokens);
}

TEST_F(RunnerModelTest, StopsOnAnEosIdAndOnlyThenWhenAsked) {
  // A random-weight model rarely picks EOS greedily, so sample (seeded, hot) until a run that
  // ignores EOS produces one, then replay the same seed with stop_on_eos.
  const auto& c = chunked_->contract();
  auto is_eos = [&](int64_t t) { return std::find(c.eos_ids.begin(), c.eos_ids.end(), t) != c.eos_ids.end(); };
  GenerationConfig config = greedy(0, false);
  config.sampling.temperature = 2.0f;
  std::vector<int64_t> through_eos;
  for (uint64_t seed = 0; seed < 100 && through_eos.empty(); ++seed) {
    config.sampling.seed = seed;
    chunked_->reset();
    const auto run = generate(*chunked_, prompt(3, c), config);
    const auto eos = std::find_if(run.tokens.begin(), run.tokens.end(), is_eos);
    if (eos != run.tokens.end() && eos + 1 != run.tokens.end()) {
      through_eos.assign(run.tokens.begin(), eos + 1);
      EXPECT_GT(run.tokens.size(), through_eos.size()) << "ignoring EOS keeps generating";
    }
  }
  ASSERT_FALSE(through_eos.empty()) << "100 seeded runs never sampled an EOS id";
  chunked_->reset();
  config.stop_on_eos = true;
  const auto stopped = generate(*chunked_, prompt(3, c), config);
  EXPECT_EQ(stopped.stats.stop_reason, StopReason::kEos);
  EXPECT_EQ(stopped.tokens, through_eos);
}

TEST_F(RunnerModelTest, KvReuseOverThreeTurnsEqualsAFullRePrefill) {
  for (TextGenerator* g : {chunked_.get(), oneshot_.get()}) {
    const auto& c = g->contract();
    const std::vector<std::vector<int64_t>> turns = {prompt(11, c, 1), prompt(6, c, 2), prompt(9, c, 3)};
    g->reset();
    std::vector<int64_t> conversation;
    Generated last;
    for (const auto& turn : turns) {
      last = generate(*g, turn, greedy(5, false));
      EXPECT_EQ(last.stats.prompt_tokens,
                static_cast<int64_t>(turn.size() + (conversation.empty() ? 0 : 1)))
          << "only the new tokens (and last turn's final token) are prefilled";
      conversation.insert(conversation.end(), turn.begin(), turn.end());
      conversation.insert(conversation.end(), last.tokens.begin(), last.tokens.end());
    }
    // Replay: everything up to the third turn's prompt in one fresh prefill.
    std::vector<int64_t> replay(conversation.begin(), conversation.end() - last.tokens.size());
    g->reset();
    const auto full = generate(*g, replay, greedy(5, false));
    EXPECT_EQ(full.tokens, last.tokens) << "max_chunk " << c.max_chunk;
    EXPECT_EQ(full.stats.cache_tokens, last.stats.cache_tokens);
  }
}

// generate_prompt() through the whole conversation equals a fresh prefill of the same prompt.
Generated fresh(TextGenerator& g, const std::vector<int64_t>& prompt, const GenerationConfig& config) {
  g.reset();
  return generate(g, prompt, config);
}

Generated from_prompt(TextGenerator& g, const std::vector<int64_t>& prompt, const GenerationConfig& config) {
  Generated run;
  auto stats = g.generate_prompt(prompt, config, [&](int64_t t) {
    run.tokens.push_back(t);
    return true;
  });
  EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message);
  if (stats.ok()) run.stats = *stats;
  return run;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(RunnerModelTest, PromptThatExtendsTheCachePrefillsOnlyTheNewTokens) {
  TextGenerator& g = *oneshot_;
  const auto& c = g.contract();
  const auto first = prompt(12, c, 1);
  const auto turn1 = from_prompt(g, first, greedy(5, false));
  EXPECT_EQ(turn1.stats.reused_tokens, 0);
  EXPECT_EQ(turn1.stats.prompt_tokens, 12);
  // The next prompt: the whole conversation (answer included) plus a new turn.
  const auto second = concat(concat(first, turn1.tokens), prompt(7, c, 2));
  const auto turn2 = from_prompt(g, second, greedy(5, false));
  EXPECT_EQ(turn2.stats.reused_tokens, 12 + 5 - 1) << "everything in the cache is reused";
  EXPECT_EQ(turn2.stats.prompt_tokens, 1 + 7) << "the pending last answer token + the new turn";
  EXPECT_EQ(turn2.tokens, fresh(g, second, greedy(5, false)).tokens);
}

TEST_F(RunnerModelTest, DivergingPromptRewindsToTheCommonPrefix) {
  TextGenerator& g = *oneshot_;  // max_chunk == max_context: a rewind is always exact
  const auto& c = g.contract();
  const auto shared = prompt(10, c, 3);
  const auto a = concat(shared, prompt(15, c, 4));
  const auto b = concat(shared, prompt(9, c, 5));
  ASSERT_NE(a[10], b[10]);
  from_prompt(g, a, greedy(6, false));
  const auto rewound = from_prompt(g, b, greedy(6, false));
  EXPECT_EQ(rewound.stats.reused_tokens, 10);
  EXPECT_EQ(rewound.stats.prompt_tokens, 9);
  EXPECT_EQ(g.position(), 10 + 9 + 6 - 1);
  const auto reference = fresh(g, b, greedy(6, false));
  EXPECT_EQ(rewound.tokens, reference.tokens) << "stale keys past the rewind point are invisible";
  // Next-token logits after the rewind equal a fresh prefill's.
  from_prompt(g, a, greedy(1, false));
  ASSERT_TRUE(g.generate_prompt(b, greedy(0), nullptr).ok());
  const LogitsView view = g.last_logits();
  const std::vector<float> after_rewind(view.data, view.data + view.size);
  EXPECT_LT(max_abs_diff(after_rewind, prefill_logits(g, b)), 1e-4f);
}

TEST_F(RunnerModelTest, SamePromptAgainRegeneratesFromItsLastToken) {
  TextGenerator& g = *oneshot_;
  const auto p = prompt(14, g.contract(), 6);
  const auto first = from_prompt(g, p, greedy(5, false));
  const auto again = from_prompt(g, p, greedy(5, false));
  EXPECT_EQ(again.stats.reused_tokens, 13);
  EXPECT_EQ(again.stats.prompt_tokens, 1);
  EXPECT_EQ(again.tokens, first.tokens);
}

TEST_F(RunnerModelTest, RewindIsExactAtAnyDepthOfAFlatCache) {
  // Llama's caches are flat (the export declares get_kv_ring_size 0): every slot keeps its
  // position, so a rewind to the common prefix is exact however far the cache has been written.
  TextGenerator& g = *chunked_;
  const auto& c = g.contract();
  ASSERT_EQ(c.kv_ring_size, 0);
  const auto shared = prompt(6, c, 7);
  from_prompt(g, concat(shared, prompt(4, c, 8)), greedy(3, false));  // 12 positions written
  const auto b = concat(shared, prompt(5, c, 9));
  const auto within = from_prompt(g, b, greedy(3, false));
  EXPECT_EQ(within.stats.reused_tokens, 6);
  EXPECT_EQ(within.tokens, fresh(g, b, greedy(3, false)).tokens);

  const auto long_a = concat(shared, prompt(20, c, 10));
  from_prompt(g, long_a, greedy(3, false));  // 28 positions: more than max_chunk (16)
  const auto deep = from_prompt(g, b, greedy(3, false));
  EXPECT_EQ(deep.stats.reused_tokens, 6);
  EXPECT_EQ(deep.tokens, fresh(g, b, greedy(3, false)).tokens);
}

TEST_F(RunnerModelTest, PromptBudgetIsTheWholeContextAndAnEmptyPromptKeepsTheCache) {
  TextGenerator& g = *oneshot_;
  const auto& c = g.contract();
  const auto fits = prompt(c.max_context - 4, c, 11);
  const auto run = from_prompt(g, fits, greedy(100, false));
  EXPECT_EQ(run.stats.generated_tokens, 4);
  EXPECT_EQ(run.stats.stop_reason, StopReason::kContextFull);
  auto too_long = g.generate_prompt(prompt(c.max_context + 1, c, 11), greedy(1), [](int64_t) { return true; });
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code, ErrorCode::kContextFull);

  const auto p = prompt(8, c, 12);
  from_prompt(g, p, greedy(2, false));
  const int64_t before = g.position();
  auto empty = g.generate_prompt({}, greedy(1), [](int64_t) { return true; });
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(g.position(), before);
}

TEST_F(RunnerModelTest, ResetStartsTheConversationOver) {
  const auto ids = prompt(9, chunked_->contract());
  const auto first = generate(*chunked_, ids, greedy(5, false));
  generate(*chunked_, prompt(4, chunked_->contract(), 7), greedy(3, false));
  chunked_->reset();
  EXPECT_EQ(chunked_->position(), 0);
  EXPECT_EQ(generate(*chunked_, ids, greedy(5, false)).tokens, first.tokens);
}

TEST_F(RunnerModelTest, SeededSamplingIsReproducible) {
  GenerationConfig config = greedy(12, false);
  config.sampling.temperature = 0.9f;
  config.sampling.top_k = 20;
  config.sampling.top_p = 0.9f;
  config.sampling.repetition_penalty = 1.1f;
  config.sampling.seed = 42;
  const auto ids = prompt(5, chunked_->contract());
  const auto a = generate(*chunked_, ids, config);
  chunked_->reset();
  const auto b = generate(*chunked_, ids, config);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens.size(), 12u);
}

TEST_F(RunnerModelTest, BadInputsAreErrorsWithContext) {
  auto empty = chunked_->generate({}, greedy(3), [](int64_t) { return true; });
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);

  const int64_t vocab = chunked_->contract().vocab_size;
  auto outside = chunked_->generate({1, vocab}, greedy(3), [](int64_t) { return true; });
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find(std::to_string(vocab)), std::string::npos);

  GenerationConfig bad = greedy(3);
  bad.sampling.top_p = 1.5f;
  auto invalid = chunked_->generate({1, 2}, bad, [](int64_t) { return true; });
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.error().message.find("top_p"), std::string::npos);

  // Negative max_new_tokens used to mean "unlimited"; 0 is the documented way to ask for that.
  auto negative = chunked_->generate({1, 2}, greedy(-1), [](int64_t) { return true; });
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(negative.error().message.find("max_new_tokens must be >= 0"), std::string::npos);
  EXPECT_EQ(chunked_->position(), 0);
}

// Prefix reuse on the real SmolLM2-135M-Instruct (fp32 XNNPACK, max_chunk 64, no declared ring
// size): CTest's smollm2_files fixture links it into RNE_TEST_SMOLLM2_DIR.
// Tiny random Gemma 4 (sliding layers with ring caches of window + max_chunk - 1 slots, full
// layers with flat caches), exported with named buffers: CTest's fixture passes its path in
// RNE_TEST_PTE_GEMMA4.
class Gemma4RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_ = open("RNE_TEST_PTE_GEMMA4");
    ASSERT_TRUE(g_);
  }
  std::unique_ptr<TextGenerator> g_;
};

float logit_std(const std::vector<float>& v) {
  double mean = 0, square = 0;
  for (float x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (float x : v) square += (x - mean) * (x - mean);
  return static_cast<float>(std::sqrt(square / static_cast<double>(v.size())));
}

TEST_F(Gemma4RingTest, ANewTurnRewindsPastWrappedRingsToTheCheckpointExactly) {
  TextGenerator& g = *g_;
  const auto& c = g.contract();
  ASSERT_GT(c.kv_ring_size, 0) << "the rings must be declared";
  const int64_t n = 40, margin = TextGenerator::kCheckpointMargin;
  ASSERT_GT(n, 2 * c.kv_ring_size) << "the rings must wrap during the first prompt";
  const auto first = prompt(n, c, 7);
  from_prompt(g, first, greedy(6, false));
  ASSERT_EQ(g.checkpoint_count(), 1u);

  // The next turn re-renders the end of the last prompt differently (Gemma 4's template drops
  // the generation prompt's empty thought channel): it diverges 3 tokens before that end.
  auto second = first;
  second.resize(static_cast<size_t>(n - 3));
  const auto more = prompt(12, c, 8);
  second.insert(second.end(), more.begin(), more.end());
  auto stats = g.generate_prompt(second, greedy(0), nullptr);
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->reused_tokens, n - margin) << "back to the checkpoint, not to position 0";
  EXPECT_EQ(stats->prompt_tokens, static_cast<int64_t>(second.size()) - (n - margin));
  const LogitsView view = g.last_logits();
  const std::vector<float> resumed(view.data, view.data + view.size);
  const auto cold = prefill_logits(g, second);
  // fp32 on both paths; only the chunking differs. The logits spread over several units.
  EXPECT_GT(logit_std(cold), 0.5f);
  EXPECT_LT(max_abs_diff(resumed, cold), 1e-4f);
}

TEST_F(Gemma4RingTest, ARewindBeforeEveryCheckpointStartsOver) {
  TextGenerator& g = *g_;
  const auto& c = g.contract();
  const auto first = prompt(40, c, 9);
  from_prompt(g, first, greedy(4, false));
  auto second = first;
  second.resize(10);  // before the checkpoint at 40 - margin, after the rings wrapped
  const auto more = prompt(6, c, 10);
  second.insert(second.end(), more.begin(), more.end());
  auto stats = g.generate_prompt(second, greedy(0), nullptr);
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->reused_tokens, 0);
  const LogitsView view = g.last_logits();
  EXPECT_LT(max_abs_diff(std::vector<float>(view.data, view.data + view.size), prefill_logits(g, second)), 1e-4f);
}

class SmolLM2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = env_path("RNE_TEST_SMOLLM2_DIR");
    ASSERT_FALSE(dir.empty()) << "RNE_TEST_SMOLLM2_DIR is not set: run through ctest";
    auto loaded = LlmRunner::load(dir + "/model.pte", dir + "/tokenizer.json");
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    runner_ = std::move(loaded).value();
  }

  std::vector<int64_t> ids(const std::string& text) const { return runner_->encode(text, false); }

  // Greedy answer to the whole conversation `prompt`, reusing what the cache shares with it.
  Generated answer(const std::vector<int64_t>& prompt, int32_t max_new_tokens = 12) {
    Generated run;
    auto stats = runner_->generate_prompt(prompt, greedy(max_new_tokens), nullptr);
    EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message);
    if (stats.ok()) run.stats = *stats;
    run.tokens = runner_->last_tokens();
    return run;
  }
  Generated answer_fresh(const std::vector<int64_t>& prompt, int32_t max_new_tokens = 12) {
    runner_->reset();
    return answer(prompt, max_new_tokens);
  }

  static std::string turn(const std::string& role, const std::string& content) {
    return "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
  }

  std::unique_ptr<LlmRunner> runner_;
};

TEST_F(SmolLM2Test, EachTurnPrefillsOnlyWhatTheCacheDoesNotHoldAndAnswersAsAFreshPrefill) {
  std::string text = turn("system", "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  std::vector<Generated> turns;
  for (const char* question : {"What is the capital of France?", "And of Italy?", "Name a color."}) {
    text += turn("user", question) + "<|im_start|>assistant\n";
    const auto prompt = ids(text);
    const auto run = answer(prompt);
    if (!turns.empty()) {
      EXPECT_EQ(run.stats.reused_tokens, turns.back().stats.cache_tokens) << question;
      EXPECT_EQ(run.stats.reused_tokens + run.stats.prompt_tokens, static_cast<int64_t>(prompt.size()));
      EXPECT_LT(run.stats.prompt_tokens, 20) << question;
    }
    turns.push_back(run);
    text += runner_->decode(run.tokens);
    if (run.stats.stop_reason != StopReason::kEos) text += "<|im_end|>";
    text += "\n";
  }
  const auto last_prompt = ids(text.substr(0, text.rfind("<|im_start|>assistant\n")) + "<|im_start|>assistant\n");
  EXPECT_EQ(answer_fresh(last_prompt).tokens, turns.back().tokens);
}

TEST_F(SmolLM2Test, RewindIsExactWithinAndPastMaxChunk) {
  ASSERT_EQ(runner_->contract().max_chunk, 64);
  const auto shared = ids(turn("user", "Tell me one fact about the Moon."));
  const auto moon = ids(turn("user", "Tell me one fact about the Moon.") + "<|im_start|>assistant\n");
  const auto mars = ids(turn("user", "Tell me one fact about the Moon.") +
                        turn("assistant", "It has no air.") + turn("user", "And Mars?") +
                        "<|im_start|>assistant\n");
  ASSERT_LT(moon.size() + 12, 64u);
  // Fewer than 64 positions written: the cache can be rewound to what it shares with `mars`.
  const auto conversation = concat(moon, answer(moon).tokens);
  int64_t common = 0;
  while (common < static_cast<int64_t>(std::min(conversation.size(), mars.size())) &&
         conversation[common] == mars[common]) {
    ++common;
  }
  ASSERT_GE(common, static_cast<int64_t>(shared.size()));
  ASSERT_LT(common, static_cast<int64_t>(conversation.size()) - 1) << "a real rewind, not an extension";
  const auto within = answer(mars);
  EXPECT_EQ(within.stats.reused_tokens, common);
  EXPECT_EQ(within.tokens, answer_fresh(mars).tokens);

  std::string long_text = turn("user", "Tell me one fact about the Moon.");
  for (int i = 0; i < 6; ++i) long_text += turn("assistant", "It orbits the Earth.") + turn("user", "More?");
  const auto long_ids = ids(long_text + "<|im_start|>assistant\n");
  ASSERT_GT(long_ids.size(), 64u);
  answer(long_ids);  // more than max_chunk positions; SmolLM2's caches are flat (ring size 0)
  ASSERT_EQ(runner_->contract().kv_ring_size, 0);
  int64_t deep_common = 0;
  while (deep_common < static_cast<int64_t>(std::min(long_ids.size(), mars.size())) &&
         long_ids[deep_common] == mars[deep_common]) {
    ++deep_common;
  }
  const auto deep = answer(mars);
  EXPECT_EQ(deep.stats.reused_tokens, deep_common);
  EXPECT_EQ(deep.tokens, within.tokens);
}

// Structured output under a budget on the real model and tokenizer: the answer SmolLM2 starts
// (a long summary) does not fit in 24 tokens, so the constraint closes it.
constexpr const char* kSummarySchema =
    R"({"type":"object","properties":{"summary":{"type":"string"},"year":{"type":"integer"}},
        "required":["summary"]})";

TEST_F(SmolLM2Test, StructuredOutputClosesWithinATinyBudget) {
  const auto prompt = ids(turn("user", "Summarize the plot of Hamlet in detail, as JSON.") +
                          "<|im_start|>assistant\n");
  GenerationConfig config = greedy(24);
  config.json_schema = kSummarySchema;
  std::string text;
  auto stats = runner_->generate(prompt, config, [&](std::string_view piece) { text += piece; });
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->stop_reason, StopReason::kEos) << text;
  EXPECT_LE(stats->generated_tokens, 24);
  auto schema = grammar::compile_json_schema(kSummarySchema);
  ASSERT_TRUE(schema.ok());
  EXPECT_TRUE(grammar::JsonGrammar(**schema).matches(text)) << text;
  EXPECT_GT(text.size(), 30u) << "the model wrote its own text before the close: " << text;
}

// keep_special_tokens on the real runner: the kept end-of-turn token's text reaches the
// caller, the generation still stops on it, and a text the tokenizer lacks is refused up front.
TEST_F(SmolLM2Test, KeptSpecialTokenIsStreamedAndStillStopsTheAnswer) {
  const auto prompt = ids(turn("user", "Summarize the plot of Hamlet in detail, as JSON.") +
                          "<|im_start|>assistant\n");
  GenerationConfig config = greedy(24);
  config.json_schema = kSummarySchema;  // ends with EOS (<|im_end|>) within the budget
  auto run = [&](const std::vector<std::string>& keep) {
    runner_->reset();
    config.keep_special_tokens = keep;
    std::string text;
    auto stats = runner_->generate(prompt, config, [&](std::string_view piece) { text += piece; });
    EXPECT_TRUE(stats.ok()) << stats.error().message;
    if (stats.ok()) EXPECT_EQ(stats->stop_reason, StopReason::kEos) << text;
    return std::pair{text, runner_->last_tokens()};
  };
  const auto [plain, plain_tokens] = run({});
  const auto [kept, kept_tokens] = run({"<|im_end|>"});
  EXPECT_EQ(kept_tokens, plain_tokens);
  EXPECT_EQ(plain.find("<|im_end|>"), std::string::npos) << plain;
  EXPECT_EQ(kept, plain + "<|im_end|>");

  runner_->reset();
  config.keep_special_tokens = {"<|im_end|>", "<|channel>"};
  auto unknown = runner_->generate(prompt, config, nullptr);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.error().message.find("\"<|channel>\""), std::string::npos) << unknown.error().message;
  EXPECT_EQ(runner_->position(), 0) << "refused before the prefill";
}

TEST_F(SmolLM2Test, BudgetBelowTheShortestDocumentIsRefusedBeforeThePrefill) {
  GenerationConfig config = greedy(10);  // {"summary":""} + EOS needs 15
  config.json_schema = kSummarySchema;
  auto stats = runner_->generate(ids(turn("user", "Summarize Hamlet.")), config, nullptr);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(stats.error().message.find("needs at least 15 tokens"), std::string::npos)
      << stats.error().message;
  EXPECT_NE(stats.error().message.find("raise max_new_tokens"), std::string::npos);
  EXPECT_EQ(runner_->position(), 0) << "nothing was prefilled";
}

// json_strict reaches the schema's compiler: the same schema with a format the engine does not
// know (an annotation, ignored) generates, and under strict is refused before the prefill, also
// right after the lenient run cached its constraint. Strict without a schema is refused.
TEST_F(SmolLM2Test, StrictRefusesTheUnknownFormatTheLenientRunIgnores) {
  constexpr const char* kInt64Schema =
      R"({"type":"object","properties":{"summary":{"type":"string"},
          "year":{"type":"integer","format":"int64"}},"required":["summary"]})";
  const auto prompt = ids(turn("user", "Summarize Hamlet as JSON.") + "<|im_start|>assistant\n");
  GenerationConfig config = greedy(24);
  config.json_schema = kInt64Schema;
  std::string text;
  auto lenient = runner_->generate(prompt, config, [&](std::string_view piece) { text += piece; });
  ASSERT_TRUE(lenient.ok()) << lenient.error().message;
  auto schema = grammar::compile_json_schema(kInt64Schema);
  ASSERT_TRUE(schema.ok());
  EXPECT_TRUE(grammar::JsonGrammar(**schema).matches(text)) << text;

  runner_->reset();
  config.json_strict = true;
  auto strict = runner_->generate(prompt, config, nullptr);
  ASSERT_FALSE(strict.ok()) << "strict generated: the flag did not reach the compiler";
  EXPECT_EQ(strict.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(strict.error().message.find("format 'int64'"), std::string::npos)
      << strict.error().message;
  EXPECT_EQ(runner_->position(), 0) << "refused before the prefill";

  config.json_schema.clear();
  auto alone = runner_->generate(prompt, config, nullptr);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.error().message.find("strict applies to a JSON schema"), std::string::npos)
      << alone.error().message;
}

// The budget rule on SmolLM2's real 49,152-token vocabulary: random generations (long tokens
// preferred, so budgets bind) under every budget from the least up end with EOS in budget with
// a document the grammar accepts; every allowed token leaves a completion that fits, and with
// no token to spare every real token that is a prefix of the minimal completion is allowed.
TEST_F(SmolLM2Test, EveryBudgetClosesTheDocumentOnTheRealVocabulary) {
  const auto& contract = runner_->contract();
  auto bytes = grammar::token_byte_strings(runner_->tokenizer(), contract.vocab_size);
  for (int64_t eos : contract.eos_ids) bytes[static_cast<size_t>(eos)].clear();
  auto trie = grammar::TokenTrie::build(bytes);
  const char* schemas[] = {
      R"({"type":"object","properties":{"title":{"type":"string"},"year":{"type":"integer"},
          "genre":{"enum":["mystery","fantasy","science fiction"]},"tags":{"type":"array",
          "items":{"type":"string"},"minItems":1},"author":{"type":"object","properties":{
          "name":{"type":"string"},"alive":{"type":"boolean"}},"required":["name","alive"]}},
          "required":["title","genre","tags","author"]})",
      R"({"type":"array","items":{"type":"number"},"minItems":2})",
  };
  std::mt19937 rng(5);
  int forced_steps = 0;
  for (const char* schema_text : schemas) {
    auto schema = grammar::compile_json_schema(schema_text);
    ASSERT_TRUE(schema.ok()) << schema.error().message;
    grammar::JsonGrammar json_grammar(**schema);
    grammar::JsonSchemaConstraint constraint(*schema, trie, contract.eos_ids);
    const int64_t least = constraint.min_tokens();
    for (int64_t budget = least; budget < least + 40; budget += 3) {
      constraint.reset();
      grammar::JsonStack stack = json_grammar.start();
      std::string text;
      bool finished = false;
      for (int64_t n = 0; n < budget && !finished; ++n) {
        const int64_t remaining = budget - n;
        auto mask = constraint.allowed(remaining);
        ASSERT_TRUE(mask.ok()) << schema_text << " budget " << budget << " after '" << text
                               << "': " << mask.error().message;
        std::vector<int64_t> allowed;
        for (int64_t id = 0; id < contract.vocab_size; ++id) {
          if ((*mask)->allows(id)) allowed.push_back(id);
        }
        ASSERT_FALSE(allowed.empty());
        const std::string completion = json_grammar.minimal_completion(stack);
        if (remaining <= static_cast<int64_t>(completion.size()) + 1) {
          ++forced_steps;  // no token to spare: every real token that is a prefix of the
                           // completion is allowed
          for (int64_t id = 0; id < contract.vocab_size; ++id) {
            const std::string& b = trie->bytes(id);
            if (!b.empty() && b.size() <= completion.size() && completion.compare(0, b.size(), b) == 0) {
              EXPECT_TRUE((*mask)->allows(id)) << "'" << b << "' of '" << completion << "'";
            }
          }
        }
        // Near the end of the budget, every allowed token leaves a completion that fits.
        for (int64_t id : allowed) {
          if (remaining > static_cast<int64_t>(completion.size()) + 4) break;
          if (trie->bytes(id).empty()) continue;  // EOS
          grammar::JsonStack after = stack;
          ASSERT_TRUE(json_grammar.accepts_prefix(after, trie->bytes(id)));
          ASSERT_LE(static_cast<int64_t>(json_grammar.minimal_completion_size(after)), remaining - 2)
              << "after '" << text << "' token '" << trie->bytes(id) << "'";
        }
        int64_t token = allowed[rng() % allowed.size()];
        for (int k = 0; k < 4; ++k) {
          const int64_t other = allowed[rng() % allowed.size()];
          if (trie->bytes(token).empty() || trie->bytes(other).size() > trie->bytes(token).size()) {
            token = other;
          }
        }
        ASSERT_TRUE(constraint.accept(token).ok());
        if (trie->bytes(token).empty()) {
          finished = true;  // EOS
        } else {
          ASSERT_TRUE(json_grammar.accepts_prefix(stack, trie->bytes(token)));
          text += trie->bytes(token);
        }
      }
      EXPECT_TRUE(finished) << schema_text << " budget " << budget << ": '" << text << "'";
      EXPECT_TRUE(json_grammar.matches(text)) << text;
    }
  }
  EXPECT_GT(forced_steps, 40);
}

TEST(TextInputTest, InvalidUtf8IsAnErrorNamingTheByte) {
  EXPECT_TRUE(check_utf8("zażółć 漢字", "prompt").ok());
  auto bad = check_utf8(std::string("ab\xff", 3), "prompt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("prompt is not valid UTF-8 (byte 0xFF at offset 2)"),
            std::string::npos);
  EXPECT_FALSE(check_utf8(std::string("\xc3", 1), "prompt").ok());  // a cut character
}

TEST(ModelSessionTest, DamagedProgramIsACorruptFileErrorWithThePath) {
  const char* source = std::getenv("RNE_TEST_PTE_CHUNKED");
  ASSERT_NE(source, nullptr);
  std::ifstream in(source, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(data.size(), 1000u);
  const std::string truncated = ::testing::TempDir() + "truncated.pte";
  std::ofstream(truncated, std::ios::binary) << data.substr(0, data.size() / 2);
  auto loaded = ModelSession::load(truncated);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kInvalidModel);
  EXPECT_NE(loaded.error().message.find(truncated), std::string::npos);
  EXPECT_NE(loaded.error().message.find("corrupt file"), std::string::npos);
}

TEST(ModelSessionTest, MissingFileAndNonPteFileAreNamedErrors) {
  auto missing = ModelSession::load("/nonexistent/model.pte");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("/nonexistent/model.pte"), std::string::npos);

  const std::string junk = ::testing::TempDir() + "not_a_model.pte";
  std::ofstream(junk) << "this is a text file, not a flatbuffer";
  auto not_pte = ModelSession::load(junk);
  ASSERT_FALSE(not_pte.ok());
  EXPECT_EQ(not_pte.error().code, ErrorCode::kInvalidModel);
  EXPECT_NE(not_pte.error().message.find("not an ExecuTorch program"), std::string::npos);
}

// Non-regular files are refused on the descriptor, without blocking (a FIFO would wait forever
// for a writer); the path is not opened again after that.
TEST(ModelSessionTest, FifoAndDirectoryAreRefusedWithoutBlocking) {
  const std::string fifo = ::testing::TempDir() + "model_fifo.pte";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, ::testing::TempDir()}) {
    auto loaded = ModelSession::load(path);
    ASSERT_FALSE(loaded.ok()) << path;
    EXPECT_EQ(loaded.error().code, ErrorCode::kNotFound);
    EXPECT_NE(loaded.error().message.find("not a regular file"), std::string::npos)
        << loaded.error().message;
  }
  std::remove(fifo.c_str());
}

// A mapped model whose file is truncated under it: forward() fails cleanly instead of touching
// the pages that no longer exist (SIGBUS); a private copy does not notice at all.
TEST(ModelSessionTest, TruncatedWhileLoadedIsAnErrorForAMappingAndNothingForACopy) {
  const std::string source = env_path("RNE_TEST_PTE_CHUNKED");
  ASSERT_FALSE(source.empty()) << "RNE_TEST_PTE_CHUNKED is not set: run through ctest";
  for (const auto hold : {ModelFile::Hold::kMapped, ModelFile::Hold::kPrivateCopy}) {
    const std::string path = ::testing::TempDir() + "truncated_later.pte";
    {
      std::ifstream in(source, std::ios::binary);
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << in.rdbuf();
    }
    auto file = ModelFile::open(path, hold);
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto session = ModelSession::load(*file);
    ASSERT_TRUE(session.ok()) << session.error().message;
    const int64_t token = 1;
    ASSERT_TRUE((*session)->forward(&token, 1, 0).ok());
    ASSERT_EQ(::truncate(path.c_str(), 100), 0);
    auto after = (*session)->forward(&token, 1, 1);
    if (hold == ModelFile::Hold::kMapped) {
      ASSERT_FALSE(after.ok());
      EXPECT_NE(after.error().message.find("truncated while loaded"), std::string::npos)
          << after.error().message;
    } else {
      EXPECT_TRUE(after.ok()) << after.error().message;
    }
    std::remove(path.c_str());
  }
}

// Resident bytes of this process's mappings in [data, data + size) (/proc/self/smaps, "Rss:").
// madvise and mlock split a mapping into several, one per range given different advice.
size_t resident_bytes(const void* data, size_t size) {
  std::ifstream smaps("/proc/self/smaps");
  const auto begin = reinterpret_cast<unsigned long long>(data);
  const auto end = begin + size;
  std::string line;
  bool inside = false;
  size_t total = 0;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &lo, &hi, perms) == 3) {
      inside = lo < end && begin < hi;
      continue;
    }
    unsigned long long kb = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %llu kB", &kb) == 1) total += kb * 1024;
  }
  return total;
}

// Pages of a table that lookups made resident leave the process's resident memory when dropped;
// a private copy keeps its bytes.
TEST(ModelFileTest, DroppedLookupPagesLeaveResidentMemory) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const std::string path = ::testing::TempDir() + "lookup_pages.bin";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::vector<char> bytes(66 * page, 'x');
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  for (const auto hold : {ModelFile::Hold::kMapped, ModelFile::Hold::kPrivateCopy}) {
    auto file = ModelFile::open(path, hold);
    ASSERT_TRUE(file.ok()) << file.error().message;
    const uint8_t* table = (*file)->data() + page;
    (*file)->look_up_randomly(table, 64 * page);
    unsigned sum = 0;
    for (size_t i = 0; i < 64 * page; i += page) sum += table[i];
    EXPECT_EQ(sum, 64u * 'x');
    const size_t before = resident_bytes(table, 64 * page);
    (*file)->drop_looked_up_pages();
    const size_t after = resident_bytes(table, 64 * page);
    if (hold == ModelFile::Hold::kMapped) {
      EXPECT_GE(before, 64 * page);
      EXPECT_LE(after, before - 64 * page);
      EXPECT_EQ(table[5 * page], 'x');  // a later lookup reads the same bytes
    } else {
      EXPECT_EQ(after, before);
    }
  }
  std::remove(path.c_str());
}

// forward() drops the table pages every kTokensPerPageDrop tokens: the pages lookups made
// resident are gone after the forward that reaches the count. Measured across that one forward
// only: qemu-user, which runs this suite on arm64, frees other pages of the mapping earlier.
TEST(ModelSessionTest, TablePagesAreDroppedEveryFewDozenTokens) {
  const std::string path = env_path("RNE_TEST_PTE_CHUNKED");
  ASSERT_FALSE(path.empty()) << "RNE_TEST_PTE_CHUNKED is not set: run through ctest";
  auto file = ModelFile::open(path, ModelFile::Hold::kMapped);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto session = ModelSession::load(*file);
  ASSERT_TRUE(session.ok()) << session.error().message;
  const ModelContract& c = (*session)->contract();
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

  std::vector<int64_t> ids(ModelSession::kTokensPerPageDrop);
  // Spread over the table, so the lookups touch as many of its pages as they can.
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>(i) * c.vocab_size / static_cast<int64_t>(ids.size());
  }
  // All but the last token, at position 0 again and again (only the lookups matter here).
  for (size_t at = 0; at + 1 < ids.size(); at += c.max_chunk) {
    const int64_t count = std::min<int64_t>(c.max_chunk, ids.size() - 1 - at);
    ASSERT_TRUE((*session)->forward(ids.data() + at, count, 0).ok());
  }
  const size_t looked_up = resident_bytes((*file)->data(), (*file)->size());
  ASSERT_TRUE((*session)->forward(&ids.back(), 1, 0).ok());
  const size_t dropped = resident_bytes((*file)->data(), (*file)->size());
  EXPECT_LE(dropped + 4 * page, looked_up)
      << "the table pages were still resident after " << ModelSession::kTokensPerPageDrop
      << " tokens";
}

}  // namespace
}  // namespace rne::runner

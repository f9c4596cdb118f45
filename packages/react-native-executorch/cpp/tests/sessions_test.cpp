// Several conversations over one loaded model (LlmRunner::new_session): each session's turns,
// taken in turn with another session's, give the logits and tokens the same conversation gives
// alone on a freshly loaded model; the packed weights are held once. CTest's fixtures pass the
// tiny Llama (RNE_TEST_PTE_CHUNKED), the tiny Gemma 4 with ring caches (RNE_TEST_PTE_GEMMA4) and
// the real SmolLM2 (RNE_TEST_SMOLLM2_DIR).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "process_memory.h"
#include "rne/runner/llm_runner.h"

namespace rne::runner {
namespace {

std::string env_path(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// UTF-8 of code point `cp` (< 0x800).
std::string utf8(int cp) {
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
}

// A byte-level BPE tokenizer.json of exactly 256 tokens (no merges), for the tiny random models
// (their vocabulary is 256; the runner refuses a larger tokenizer). Written once per run.
std::string byte_tokenizer() {
  static const std::string path = [] {
    // GPT-2's byte-to-character table: printable Latin-1 bytes stand for themselves, the rest
    // for the characters from U+0100 on, in byte order.
    std::string vocab;
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const std::string ch = utf8(printable ? b : 0x100 + shifted++);
      const std::string key = ch == "\"" ? "\\\"" : ch == "\\" ? "\\\\" : ch;
      vocab += (b ? "," : "") + std::string("\"") + key + "\":" + std::to_string(b);
    }
    const std::string file = ::testing::TempDir() + "rne_sessions_bytes256.json";
    std::ofstream(file) << R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[],)"
                        << R"("normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,)"
                        << R"("trim_offsets":true,"use_regex":false},"post_processor":null,)"
                        << R"("decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,)"
                        << R"("use_regex":true},"model":{"type":"BPE","dropout":null,"unk_token":null,)"
                        << R"("continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,)"
                        << R"("byte_fallback":false,"ignore_merges":false,"vocab":{)" << vocab
                        << R"(},"merges":[]}})";
    return file;
  }();
  return path;
}

// Loads a .pte with `tokenizer` (default: the byte-level one of the tiny models).
std::unique_ptr<LlmRunner> load(const std::string& pte, std::string tokenizer = {}) {
  if (pte.empty()) {
    ADD_FAILURE() << "RNE_TEST_PTE_* is not set: run through ctest (its fixtures export them)";
    return nullptr;
  }
  auto loaded = LlmRunner::load(pte, tokenizer.empty() ? byte_tokenizer() : tokenizer);
  if (!loaded.ok()) {
    ADD_FAILURE() << loaded.error().message;
    return nullptr;
  }
  return std::move(loaded).value();
}

// One turn's outcome: the answer's tokens and the logits after it.
struct Turn {
  std::vector<int64_t> tokens;
  std::vector<float> logits;
  int64_t reused = 0;
};

// Greedy answer to the whole conversation `prompt` (prefix reuse), then the logits of the
// conversation with the answer fed back (what the next turn's first token is sampled from).
Turn turn(LlmRunner& runner, const std::vector<int64_t>& prompt) {
  Turn out;
  GenerationConfig config;
  config.max_new_tokens = 6;
  config.stop_on_eos = false;
  auto stats = runner.generate_prompt(prompt, config, nullptr);
  EXPECT_TRUE(stats.ok()) << (stats.ok() ? "" : stats.error().message);
  if (!stats.ok()) return out;
  out.tokens = runner.last_tokens();
  out.reused = stats->reused_tokens;
  // The last answer token is pending (not yet fed): prefill it to see the next distribution.
  auto filled = runner.generator().prefill({});
  EXPECT_TRUE(filled.ok()) << (filled.ok() ? "" : filled.error().message);
  const LogitsView logits = runner.generator().last_logits();
  out.logits.assign(logits.data, logits.data + logits.size);
  return out;
}

// Conversations as growing token prompts: each turn appends the previous answer and a user line.
std::vector<std::vector<int64_t>> script(int64_t vocab, int64_t salt, int turns) {
  std::vector<std::vector<int64_t>> lines;
  for (int t = 0; t < turns; ++t) {
    std::vector<int64_t> line;
    for (int64_t i = 0; i < 7 + t * 3; ++i) line.push_back((i * 53 + salt * 977 + t * 13 + 3) % vocab);
    lines.push_back(line);
  }
  return lines;
}

// Plays the conversations (`scripts[i]`: its user lines) on `runners[i]`, turn by turn in the
// order given by `order` (indices into runners), and returns each conversation's turns.
std::vector<std::vector<Turn>> play(const std::vector<LlmRunner*>& runners,
                                    const std::vector<std::vector<std::vector<int64_t>>>& scripts,
                                    const std::vector<size_t>& order) {
  std::vector<std::vector<Turn>> turns(runners.size());
  std::vector<std::vector<int64_t>> history(runners.size());
  std::vector<size_t> next(runners.size(), 0);
  for (size_t who : order) {
    auto& h = history[who];
    const auto& line = scripts[who][next[who]++];
    h.insert(h.end(), line.begin(), line.end());
    turns[who].push_back(turn(*runners[who], h));
    h.insert(h.end(), turns[who].back().tokens.begin(), turns[who].back().tokens.end());
  }
  return turns;
}

void expect_alone_equals_together(const std::string& pte) {
  auto first = load(pte);
  ASSERT_TRUE(first);
  auto second = first->new_session();
  ASSERT_TRUE(second.ok()) << second.error().message;
  const int64_t vocab = first->contract().vocab_size;
  const std::vector<std::vector<std::vector<int64_t>>> scripts{script(vocab, 1, 3),
                                                               script(vocab, 2, 3)};
  // Together: the sessions' turns interleaved, and the second starting second.
  auto together = play({first.get(), second->get()}, scripts, {0, 1, 1, 0, 0, 1});
  // Alone: each conversation on a model of its own.
  for (size_t who = 0; who < 2; ++who) {
    auto alone_runner = load(pte);
    ASSERT_TRUE(alone_runner);
    auto alone = play({alone_runner.get()}, {scripts[who]}, {0, 0, 0});
    ASSERT_EQ(alone[0].size(), together[who].size());
    for (size_t t = 0; t < alone[0].size(); ++t) {
      EXPECT_EQ(alone[0][t].tokens, together[who][t].tokens) << "session " << who << " turn " << t;
      EXPECT_EQ(alone[0][t].logits, together[who][t].logits) << "session " << who << " turn " << t;
      // Each session reuses its own cache: the other's turns did not evict it.
      EXPECT_EQ(alone[0][t].reused, together[who][t].reused) << "session " << who << " turn " << t;
    }
  }
  // The two conversations differ, so equal results are not an accident of equal inputs.
  EXPECT_NE(together[0][0].logits, together[1][0].logits);
}

TEST(SessionsTest, TwoSessionsOfTinyLlamaEqualEachAlone) {
  expect_alone_equals_together(env_path("RNE_TEST_PTE_CHUNKED"));
}

TEST(SessionsTest, TwoSessionsOfTinyGemma4WithRingsEqualEachAlone) {
  expect_alone_equals_together(env_path("RNE_TEST_PTE_GEMMA4"));
}

TEST(SessionsTest, ASessionOutlivesTheRunnerItCameFrom) {
  auto first = load(env_path("RNE_TEST_PTE_CHUNKED"));
  ASSERT_TRUE(first);
  auto second = first->new_session();
  ASSERT_TRUE(second.ok()) << second.error().message;
  auto third = (*second)->new_session();  // a session of a session: the same model
  ASSERT_TRUE(third.ok()) << third.error().message;
  const auto lines = script(first->contract().vocab_size, 3, 1);
  const Turn before = turn(**third, lines[0]);
  first.reset();
  second->reset();
  (*third)->reset();
  const Turn after = turn(**third, lines[0]);
  EXPECT_EQ(before.tokens, after.tokens);
  EXPECT_EQ(before.logits, after.logits);
}

int64_t anon_bytes() { return rne::host::resident_bytes().anon; }

// The weights are packed once: a second session of the real SmolLM2 (fp32: ~540 MB of packed
// weights) adds about its own planned arenas, not another copy of the weights. The bound is
// loose (1.5x the arenas, far below one copy of the weights) since allocators round; the
// benchmark (tools/benchmarks/multi_session_benchmark.py) prints the exact ratio.
TEST(SessionsTest, ASecondSessionAddsItsArenasNotTheWeights) {
  const std::string dir = env_path("RNE_TEST_SMOLLM2_DIR");
  ASSERT_FALSE(dir.empty()) << "RNE_TEST_SMOLLM2_DIR is not set: run through ctest";
  const int64_t before_load = anon_bytes();
  auto first = load(dir + "/model.pte", dir + "/tokenizer.json");
  ASSERT_TRUE(first);
  ASSERT_TRUE(turn(*first, {1, 2, 3, 4}).tokens.size() > 0);
  const int64_t one = anon_bytes();
  auto second = first->new_session();
  ASSERT_TRUE(second.ok()) << second.error().message;
  ASSERT_TRUE(turn(**second, {5, 6, 7, 8}).tokens.size() > 0);
  const int64_t two = anon_bytes();
  const auto arenas = static_cast<int64_t>((*second)->session_bytes());
  ASSERT_GT(arenas, 0);
  EXPECT_LT(two - one, arenas * 3 / 2)
      << "the second session added " << (two - one) << " bytes; its arenas are " << arenas
      << " and the first load added " << (one - before_load);
  EXPECT_GT(one - before_load, 2 * (two - one)) << "the weights should dominate the first load";
}

}  // namespace
}  // namespace rne::runner

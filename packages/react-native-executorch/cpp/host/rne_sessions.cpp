// rne_sessions: several conversations over one loaded model (LlmRunner::new_session), measured
// for tools/benchmarks/multi_session_benchmark.py. Prints one JSON object:
//   - the anonymous resident memory (heap and arenas; the mapped program is file memory) the
//     first load and each further session add, against each session's planned arenas (KV
//     caches and activations);
//   - a switch: the next turn of a --context-token conversation after another session's turn,
//     against the same turn with no other session in between, and against prefilling the
//     conversation again (what one runner shared by two conversations would pay).
//
//   rne_sessions --model model.pte --tokenizer tokenizer.json [--sessions 3] [--context 2000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>
#include <vector>

#include "process_memory.h"
#include "rne/runner/llm_runner.h"
#include "rne/tokenizer/tokenizer.h"

namespace {

using rne::runner::GenerationConfig;
using rne::runner::LlmRunner;
using rne::runner::Stats;

int64_t anon_bytes() { return rne::host::resident_bytes().anon; }

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "rne_sessions: %s\n", message.c_str());
  std::exit(1);
}

// Token ids of a deterministic text-like prompt (inside the tokenizer's vocabulary).
std::vector<int64_t> ids(int64_t count, int64_t salt, int64_t vocab) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) out.push_back(100 + (i * 7919 + salt * 104729) % (vocab - 200));
  return out;
}

Stats turn(LlmRunner& runner, std::vector<int64_t>& conversation) {
  GenerationConfig config;
  config.max_new_tokens = 4;
  config.stop_on_eos = false;
  auto stats = runner.generate_prompt(conversation, config, nullptr);
  if (!stats.ok()) fail(stats.error().message);
  const auto& answer = runner.last_tokens();
  conversation.insert(conversation.end(), answer.begin(), answer.end());
  return *stats;
}

std::string stats_json(const Stats& s) {
  char out[256];
  std::snprintf(out, sizeof(out),
                "{\"ttft_ms\": %.1f, \"prefill_ms\": %.1f, \"prompt_tokens\": %lld, "
                "\"reused_tokens\": %lld}",
                s.ttft_ms, s.prefill_ms, static_cast<long long>(s.prompt_tokens),
                static_cast<long long>(s.reused_tokens));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, tokenizer;
  int sessions = 3;
  int64_t context = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model") model = argv[i + 1];
    else if (flag == "--tokenizer") tokenizer = argv[i + 1];
    else if (flag == "--sessions") sessions = std::atoi(argv[i + 1]);
    else if (flag == "--context") context = std::atoll(argv[i + 1]);
    else fail("unknown option " + flag);
  }
  if (model.empty() || tokenizer.empty() || sessions < 2 || context < 1) {
    fail("usage: rne_sessions --model model.pte --tokenizer tokenizer.json [--sessions N>=2] "
         "[--context tokens]");
  }
  const int64_t before = anon_bytes();
  auto first = LlmRunner::load(model, tokenizer);
  if (!first.ok()) fail(first.error().message);
  std::vector<std::unique_ptr<LlmRunner>> runners;
  runners.push_back(std::move(first).value());
  const int64_t vocab = std::min<int64_t>(runners[0]->contract().vocab_size,
                                          static_cast<int64_t>(runners[0]->tokenizer().vocab_size()));
  std::vector<std::vector<int64_t>> conversations;
  conversations.push_back(ids(16, 0, vocab));
  turn(*runners[0], conversations[0]);
  std::vector<int64_t> resident{anon_bytes()};
  std::vector<double> create_ms;
  for (int s = 1; s < sessions; ++s) {
    const auto start = std::chrono::steady_clock::now();
    auto next = runners[0]->new_session();
    if (!next.ok()) fail(next.error().message);
    create_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    runners.push_back(std::move(next).value());
    conversations.push_back(ids(16, s, vocab));
    turn(*runners.back(), conversations.back());
    resident.push_back(anon_bytes());
  }

  // The switch: a long conversation in session 0, a turn of session 1, then session 0 again.
  const int64_t room = runners[0]->contract().max_context - 64;
  std::vector<int64_t> chat = ids(std::min(context, room), 7, vocab);
  const Stats filled = turn(*runners[0], chat);
  turn(*runners[1], conversations[1]);
  auto more = ids(16, 8, vocab);
  chat.insert(chat.end(), more.begin(), more.end());
  const Stats switched = turn(*runners[0], chat);
  more = ids(16, 9, vocab);
  chat.insert(chat.end(), more.begin(), more.end());
  const Stats stayed = turn(*runners[0], chat);

  std::printf("{\"model\": \"%s\", \"session_bytes\": %llu, \"first_load_bytes\": %lld, "
              "\"added_bytes\": [",
              model.c_str(), static_cast<unsigned long long>(runners[0]->session_bytes()),
              static_cast<long long>(resident[0] - before));
  for (size_t i = 1; i < resident.size(); ++i) {
    std::printf("%s%lld", i > 1 ? ", " : "", static_cast<long long>(resident[i] - resident[i - 1]));
  }
  std::printf("], \"create_ms\": [");
  for (size_t i = 0; i < create_ms.size(); ++i) std::printf("%s%.1f", i ? ", " : "", create_ms[i]);
  std::printf("], \"context\": %lld, \"fill\": %s, \"after_switch\": %s, \"no_switch\": %s}\n",
              static_cast<long long>(filled.prompt_tokens), stats_json(filled).c_str(),
              stats_json(switched).c_str(), stats_json(stayed).c_str());
  return 0;
}

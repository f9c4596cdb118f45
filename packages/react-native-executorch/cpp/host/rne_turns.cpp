// rne_turns: a conversation through our runner, one turn per input line, for the multi-turn
// reuse benchmark (tools/benchmarks/multiturn_reuse_benchmark.py).
//
//   rne_turns --model FILE.pte --answer-tokens 24 [--no-checkpoints] [--check-cold]
//
// Each stdin line is the whole prompt of a turn (comma-separated token ids, as the chat
// template renders the conversation so far). The runner reuses its cache against it, then
// generates up to --answer-tokens greedily. One JSON line per turn on stdout:
//   {"reused": R, "prompt": P, "prefill_ms": T, "answer": [ids], "cold_max_abs_diff": D,
//    "logit_std": S}
// --check-cold also prefills the same prompt from an empty cache in a second session and
// reports the largest difference of the next-token logits (D) and their spread (S).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_options.h"

#include "rne/runner/model_session.h"
#include "rne/runner/text_generator.h"

namespace {

using rne::runner::GenerationConfig;
using rne::runner::TextGenerator;

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "rne_turns: " << message << "\n";
  std::exit(1);
}

std::unique_ptr<TextGenerator> open(const std::string& path) {
  auto session = rne::runner::ModelSession::load(path);
  if (!session.ok()) fail(session.error().message);
  return std::make_unique<TextGenerator>(std::move(session).value());
}

std::vector<float> logits_of(const TextGenerator& g) {
  const auto view = g.last_logits();
  return std::vector<float>(view.data, view.data + view.size);
}

int64_t argmax(const std::vector<float>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int64_t answer_tokens = 16;
  bool checkpoints = true, check_cold = false;
  const auto problem = rne::host::CliOptions()
                           .text("--model", model)
                           .integer("--answer-tokens", answer_tokens)
                           .flag("--no-checkpoints", checkpoints, false)
                           .flag("--check-cold", check_cold)
                           .parse(argc, argv);
  if (problem) fail(*problem);
  if (model.empty()) fail("--model is required");
  if (answer_tokens < 1) fail("--answer-tokens must be >= 1");
  auto chat = open(model);
  chat->set_checkpoints(checkpoints);
  auto cold = check_cold ? open(model) : nullptr;

  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<int64_t> prompt;
    std::stringstream in(line);
    for (std::string item; std::getline(in, item, ',');) prompt.push_back(std::stoll(item));
    if (prompt.empty()) fail("an empty turn");
    GenerationConfig prefill_only;
    auto stats = chat->generate_prompt(prompt, prefill_only, nullptr);
    if (!stats.ok()) fail(stats.error().message);
    const auto next = logits_of(*chat);
    double diff = -1, spread = -1;
    if (cold) {
      cold->reset();
      auto cold_stats = cold->prefill(prompt);
      if (!cold_stats.ok()) fail(cold_stats.error().message);
      const auto reference = logits_of(*cold);
      diff = 0;
      double mean = 0, square = 0;
      for (size_t i = 0; i < next.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(next[i] - reference[i])));
        mean += reference[i];
      }
      mean /= static_cast<double>(reference.size());
      for (float x : reference) square += (x - mean) * (x - mean);
      spread = std::sqrt(square / static_cast<double>(reference.size()));
    }
    // Greedy answer: the first token from the prefill's logits, the rest decoded.
    std::vector<int64_t> answer{argmax(next)};
    GenerationConfig decode;
    decode.max_new_tokens = static_cast<int32_t>(answer_tokens - 1);
    if (answer_tokens > 1) {
      auto rest = chat->generate({answer.front()}, decode, [&](int64_t t) {
        answer.push_back(t);
        return true;
      });
      if (!rest.ok()) fail(rest.error().message);
    }
    std::cout << "{\"reused\": " << stats->reused_tokens << ", \"prompt\": " << stats->prompt_tokens
              << ", \"prefill_ms\": " << stats->prefill_ms << ", \"answer\": [";
    for (size_t i = 0; i < answer.size(); ++i) std::cout << (i ? ", " : "") << answer[i];
    std::cout << "], \"cold_max_abs_diff\": " << diff << ", \"logit_std\": " << spread << "}"
              << std::endl;
  }
  return 0;
}

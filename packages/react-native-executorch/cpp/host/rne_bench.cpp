// rne_bench: the numbers behind tools/benchmarks/runner_benchmark.py, as one JSON object.
//
//   rne_bench --model FILE.pte [--prompt-tokens 128] [--new-tokens 64] [--repeat 5] [--bare 1]
//     prefill and decode tok/s of our TextGenerator against a bare Module::execute loop on the
//     same file (chunked prefill + T=1 decode + argmax, nothing else), interleaved run by run so
//     both see the same machine load; best run of each. --bare 0: the runner alone ("bare" is
//     null), for callers that compare it with other engines.
//   rne_bench --model FILE.pte --memory 1 [--prompt-tokens 512] [--new-tokens 32]
//     one cold run (no warm-up, no bare loop): resident memory (Linux /proc/self/status) at its
//     peak during the load, the prefill and the decode, each phase's peak counted from the end
//     of the phase before, and what is resident after each, split into anonymous memory and
//     pages of mapped files.
//   rne_bench --model FILE.pte --verify-sweep 1 [--prompt-tokens 128] [--iterations 20]
//     what speculative decoding pays per round: after a prompt of --prompt-tokens, the median
//     ms of one forward(T=1) and of verify(T=k) for k = 1 .. the program's max_verify, the calls
//     interleaved at the same position (each rewrites the same cache slots).
//   rne_bench --sampler-vocab 262144 [--iterations 200]
//     sampler ms/token per configuration, median (logits shaped like an LM's: a heavy head on
//     noise).
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/platform/platform.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli_options.h"
#include "process_memory.h"

#include "rne/runner/model_session.h"
#include "rne/runner/sampler.h"
#include "rne/runner/text_generator.h"

namespace {

namespace et = ::executorch;
using Clock = std::chrono::steady_clock;
using rne::runner::GenerationConfig;
using rne::runner::ModelSession;
using rne::runner::Sampler;
using rne::runner::SamplerConfig;
using rne::runner::TextGenerator;

void quiet_log(et_timestamp_t, et_pal_log_level_t level, const char*, const char*, size_t,
               const char* message, size_t length) {
  if (level == kError || level == kFatal) {
    std::fprintf(stderr, "executorch: %.*s\n", static_cast<int>(length), message);
  }
}

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "rne_bench: %s\n", message.c_str());
  std::exit(1);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Rates are reported as the best of the runs: other load on the machine only ever slows a
// run down, so the fastest run is the closest to what the code itself costs.
double best(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

// Resident set in MiB, from /proc/self/status (-1 where the system has none).
struct Resident {
  double peak = -1;  // VmHWM: the highest VmRSS since the last reset_peak()
  double anon = -1;  // RssAnon: the process's own memory (heap, caches, packed weights)
  double file = -1;  // RssFile: pages of mapped files (the model), reclaimable when clean
};

Resident resident_now() {
  const rne::host::ResidentBytes r = rne::host::resident_bytes();
  auto mib = [](int64_t bytes) { return bytes < 0 ? -1.0 : bytes / 1048576.0; };
  return {mib(r.peak), mib(r.anon), mib(r.file)};
}

// Starts a new peak: VmHWM drops to the current VmRSS (Linux: "5" to clear_refs).
void reset_peak() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return;
  std::fputs("5", f);
  std::fclose(f);
}

void print_resident(const char* name, const Resident& r, bool last) {
  std::printf("\"%s\":{\"peak_mb\":%.1f,\"anon_mb\":%.1f,\"file_mb\":%.1f}%s", name, r.peak,
              r.anon, r.file, last ? "" : ",");
}

// The prompt every mode feeds (and decode_context_benchmark.py gives llama.cpp): ids spread over
// the vocabulary, the same on every run.
std::vector<int64_t> synthetic_prompt(int tokens, int64_t vocab_size) {
  std::vector<int64_t> prompt;
  for (int i = 0; i < tokens; ++i) prompt.push_back((i * 7919 + 13) % vocab_size);
  return prompt;
}

struct Rates {
  double prefill = 0;  // tokens/s
  double decode = 0;   // tokens/s over the T=1 steps
};

// The runtime's limit: the same forward calls the runner makes, with nothing around them.
Rates bare_loop(et::extension::module::Module& module, const std::vector<int64_t>& prompt,
                int64_t chunk, int new_tokens) {
  std::vector<int64_t> tokens(static_cast<size_t>(chunk));
  int64_t pos = 0;
  auto forward = [&](const int64_t* ids, int64_t n) -> const float* {
    std::copy(ids, ids + n, tokens.begin());
    int64_t start = pos;
    auto t = et::extension::from_blob(tokens.data(), {1, static_cast<int>(n)},
                                      et::aten::ScalarType::Long);
    auto p = et::extension::from_blob(&start, {1}, et::aten::ScalarType::Long);
    auto out = module.execute("forward", {t, p});
    if (!out.ok()) fail("bare forward failed");
    pos += n;
    return out->at(0).toTensor().const_data_ptr<float>();
  };
  const auto sizes = module.method_meta("forward")->output_tensor_meta(0)->sizes();
  const int64_t vocab = sizes[sizes.size() - 1];
  const auto t0 = Clock::now();
  const float* logits = nullptr;
  for (size_t i = 0; i < prompt.size(); i += chunk) {
    logits = forward(prompt.data() + i, std::min<int64_t>(chunk, prompt.size() - i));
  }
  const double prefill_s = seconds_since(t0);
  const auto t1 = Clock::now();
  for (int i = 1; i < new_tokens; ++i) {
    const int64_t next = std::max_element(logits, logits + vocab) - logits;
    logits = forward(&next, 1);
  }
  const double decode_s = seconds_since(t1);
  return {prompt.size() / prefill_s, (new_tokens - 1) / decode_s};
}

Rates runner_run(TextGenerator& generator, const std::vector<int64_t>& prompt, int new_tokens) {
  generator.reset();
  GenerationConfig config;
  config.max_new_tokens = new_tokens;
  config.stop_on_eos = false;
  auto stats = generator.generate(prompt, config, [](int64_t) { return true; });
  if (!stats.ok()) fail(stats.error().message);
  return {stats->prefill_tokens_per_s(), stats->decode_tokens_per_s()};
}

void bench_model(const std::string& path, int prompt_tokens, int new_tokens, int repeat,
                 bool with_bare) {
  auto session = ModelSession::load(path);
  if (!session.ok()) fail(session.error().message);
  const auto contract = (*session)->contract();
  if (prompt_tokens + new_tokens > contract.max_context) fail("prompt + new tokens exceed the context");
  TextGenerator generator(std::move(session).value());
  // Loaded only when compared: a second copy of the program would double the process's memory.
  std::unique_ptr<et::extension::module::Module> bare;
  if (with_bare) {
    bare = std::make_unique<et::extension::module::Module>(
        path, et::extension::module::Module::LoadMode::MmapUseMlockIgnoreErrors);
    if (bare->load_method("forward") != et::runtime::Error::Ok) fail("bare load failed");
  }

  const std::vector<int64_t> prompt = synthetic_prompt(prompt_tokens, contract.vocab_size);
  // Warm-up (first-call delegate setup, weight page faults) for both, on one chunk: a long
  // prompt's prefill would cost as much as a measured run.
  const int64_t warm_tokens = std::min<int64_t>(contract.max_chunk, prompt_tokens);
  const std::vector<int64_t> warm(prompt.begin(), prompt.begin() + warm_tokens);
  if (with_bare) bare_loop(*bare, warm, contract.max_chunk, 4);
  runner_run(generator, warm, 4);

  std::vector<double> bp, bd, rp, rd;
  for (int r = 0; r < repeat; ++r) {
    // Alternate which goes first, so neither always inherits the other's warm caches.
    Rates b, o;
    if (!with_bare) {
      o = runner_run(generator, prompt, new_tokens);
    } else if (r % 2 == 0) {
      b = bare_loop(*bare, prompt, contract.max_chunk, new_tokens);
      o = runner_run(generator, prompt, new_tokens);
    } else {
      o = runner_run(generator, prompt, new_tokens);
      b = bare_loop(*bare, prompt, contract.max_chunk, new_tokens);
    }
    bp.push_back(b.prefill), bd.push_back(b.decode), rp.push_back(o.prefill), rd.push_back(o.decode);
  }
  char bare_json[96] = "null";
  if (with_bare) {
    std::snprintf(bare_json, sizeof bare_json, "{\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f}",
                  best(bp), best(bd));
  }
  std::printf(
      "{\"model\":\"%s\",\"max_chunk\":%lld,\"vocab_size\":%lld,\"prompt_tokens\":%d,"
      "\"new_tokens\":%d,\"repeat\":%d,\"bare\":%s,"
      "\"runner\":{\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f}}\n",
      path.c_str(), static_cast<long long>(contract.max_chunk),
      static_cast<long long>(contract.vocab_size), prompt_tokens, new_tokens, repeat, bare_json,
      best(rp), best(rd));
}

void bench_memory(const std::string& path, int prompt_tokens, int new_tokens) {
  const Resident before = resident_now();
  reset_peak();
  const auto t0 = Clock::now();
  auto session = ModelSession::load(path);
  if (!session.ok()) fail(session.error().message);
  const auto contract = (*session)->contract();
  if (prompt_tokens + new_tokens > contract.max_context) fail("prompt + new tokens exceed the context");
  TextGenerator generator(std::move(session).value());
  const double load_s = seconds_since(t0);
  Resident load = resident_now(), prefill, decode;
  reset_peak();

  const std::vector<int64_t> prompt = synthetic_prompt(prompt_tokens, contract.vocab_size);
  GenerationConfig config;
  config.max_new_tokens = new_tokens;
  config.stop_on_eos = false;
  bool first = true;
  // The first token comes from the prefill's logits: its callback ends the prefill phase.
  auto stats = generator.generate(prompt, config, [&](int64_t) {
    if (first) prefill = resident_now(), reset_peak(), first = false;
    return true;
  });
  if (!stats.ok()) fail(stats.error().message);
  decode = resident_now();
  std::printf("{\"model\":\"%s\",\"max_context\":%lld,\"prompt_tokens\":%d,\"new_tokens\":%d,"
              "\"load_s\":%.2f,\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f,\"resident\":{",
              path.c_str(), static_cast<long long>(contract.max_context), prompt_tokens,
              new_tokens, load_s, stats->prefill_tokens_per_s(), stats->decode_tokens_per_s());
  print_resident("start", before, false);
  print_resident("load", load, false);
  print_resident("prefill", prefill, false);
  print_resident("decode", decode, true);
  std::printf("}}\n");
}

void bench_verify(const std::string& path, int prompt_tokens, int iterations) {
  auto session = ModelSession::load(path);
  if (!session.ok()) fail(session.error().message);
  ModelSession& model = **session;
  const auto& contract = model.contract();
  if (contract.max_verify == 0) fail(path + " has no verify method (export with --verify-tokens)");
  std::vector<int64_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int i = 0; i < prompt_tokens; ++i) prompt[i] = (i * 37 + 5) % contract.vocab_size;
  for (int at = 0; at < prompt_tokens; at += static_cast<int>(contract.max_chunk)) {
    const int64_t n = std::min<int64_t>(contract.max_chunk, prompt_tokens - at);
    if (auto out = model.forward(prompt.data() + at, n, at); !out.ok()) fail(out.error().message);
  }
  std::vector<int64_t> chunk(static_cast<size_t>(contract.max_verify), 11);
  std::vector<std::vector<double>> ms(static_cast<size_t>(contract.max_verify) + 1);
  for (int i = 0; i < iterations + 2; ++i) {  // the first two warm up (verify loads lazily)
    for (int64_t k = 0; k <= contract.max_verify; ++k) {
      const auto t = Clock::now();
      auto out = k == 0 ? model.forward(chunk.data(), 1, prompt_tokens)
                        : model.verify(chunk.data(), k, prompt_tokens);
      if (!out.ok()) fail(out.error().message);
      if (i >= 2) ms[static_cast<size_t>(k)].push_back(seconds_since(t) * 1000.0);
    }
  }
  std::printf("{\"model\":\"%s\",\"prompt_tokens\":%d,\"iterations\":%d,\"forward_ms\":%.3f,"
              "\"verify_ms\":[", path.c_str(), prompt_tokens, iterations, median(ms[0]));
  for (int64_t k = 1; k <= contract.max_verify; ++k) {
    std::printf("%s%.3f", k > 1 ? "," : "", median(ms[static_cast<size_t>(k)]));
  }
  std::printf("]}\n");
}

void bench_sampler(int64_t vocab, int iterations) {
  std::mt19937 gen(1);
  std::normal_distribution<float> noise(0.0f, 2.5f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (auto& l : logits) l = noise(gen);
  for (int i = 0; i < 50; ++i) logits[gen() % vocab] += 10.0f + i * 0.1f;  // the plausible head
  std::vector<int64_t> context;
  for (int i = 0; i < 1024; ++i) context.push_back(gen() % vocab);

  struct Case {
    const char* name;
    SamplerConfig config;
  };
  auto make = [](float t, int k, float p, float min_p, float penalty) {
    SamplerConfig c;
    c.temperature = t, c.top_k = k, c.top_p = p, c.min_p = min_p, c.repetition_penalty = penalty;
    return c;
  };
  const std::vector<Case> cases = {
      {"greedy", make(0, 0, 1, 0, 1)},
      {"greedy+rep_penalty", make(0, 0, 1, 0, 1.1f)},
      {"temperature", make(0.8f, 0, 1, 0, 1)},
      {"top_k40+rep_penalty", make(0.8f, 40, 1, 0, 1.1f)},
      {"top_p0.9+rep_penalty", make(0.8f, 0, 0.9f, 0, 1.1f)},
      {"min_p0.05+rep_penalty", make(0.8f, 0, 1, 0.05f, 1.1f)},
      {"top_k64+top_p0.95+min_p0.05+rep_penalty", make(0.8f, 64, 0.95f, 0.05f, 1.1f)},
      {"top_p0.9+min_p0.05+rep_penalty", make(0.8f, 0, 0.9f, 0.05f, 1.1f)},
  };
  std::printf("{\"vocab_size\":%lld,\"context_tokens\":%zu,\"iterations\":%d,\"ms_per_token\":{",
              static_cast<long long>(vocab), context.size(), iterations);
  std::vector<float> work(logits.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    Sampler sampler(cases[c].config, vocab);
    std::vector<double> ms;
    for (int i = 0; i < iterations; ++i) {
      std::copy(logits.begin(), logits.end(), work.begin());  // fresh logits, outside the timing
      const auto t = Clock::now();
      volatile int64_t id = sampler.sample(work.data(), context);
      (void)id;
      ms.push_back(seconds_since(t) * 1000.0);
    }
    std::printf("%s\"%s\":%.4f", c ? "," : "", cases[c].name, median(ms));
  }
  std::printf("}}\n");
}

}  // namespace

int main(int argc, char** argv) {
  et::runtime::register_pal(et::runtime::PalImpl::create(quiet_log, __FILE__));
  std::string model;
  int prompt_tokens = 128, new_tokens = 64, repeat = 5, iterations = 0, with_bare = 1;
  int memory = 0, verify_sweep = 0;
  int64_t sampler_vocab = 0;
  const auto problem = rne::host::CliOptions()
                           .text("--model", model)
                           .integer("--prompt-tokens", prompt_tokens)
                           .integer("--new-tokens", new_tokens)
                           .integer("--repeat", repeat)
                           .integer("--bare", with_bare)
                           .integer("--memory", memory)
                           .integer("--verify-sweep", verify_sweep)
                           .integer("--sampler-vocab", sampler_vocab)
                           .integer("--iterations", iterations)
                           .parse(argc, argv);
  if (problem) fail(*problem);
  if (sampler_vocab > 0) {
    bench_sampler(sampler_vocab, iterations > 0 ? iterations : 200);
    return 0;
  }
  if (model.empty()) fail("--model FILE.pte or --sampler-vocab N is required");
  if (verify_sweep != 0) bench_verify(model, prompt_tokens, iterations > 0 ? iterations : 20);
  else if (memory != 0) bench_memory(model, prompt_tokens, new_tokens);
  else bench_model(model, prompt_tokens, new_tokens, repeat, with_bare != 0);
  return 0;
}

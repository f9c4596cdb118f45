// Measures what JSON-schema-constrained sampling costs per token on a real vocabulary (driven by
// tools/benchmarks/json_schema_benchmark.py, which prints the summary).
//
//   rne_json_mask_bench --tokenizer tokenizer.json --cases cases.jsonl
//
// cases.jsonl: one {"schema": "<the schema's JSON text>", "document": "..."} per line. Each document is tokenized and
// replayed as if the model had generated it: per token, the time of the constraint's mask
// (JsonSchemaConstraint::allowed), then of a greedy sample over random logits with and without
// the mask; every token of the document must be allowed. The token budget is the tightest the
// document fits in whatever its tokenization (one token per byte left, plus EOS), so the budget
// checks near the end of each document are part of the cost. Each case runs twice: "cold" (a new
// constraint, nothing cached) and "warm" (reset(): the next generation with the same schema).
// Prints one JSON object per case and pass, with the per-token times in microseconds.
//
//   rne_json_mask_bench --tokenizer tokenizer.json --cases - --report [--samples N]
//                       [--max-tokens M] [--seed S]
//
// --report (driven by tools/benchmarks/structured_output_benchmark.py): a corpus run that keeps
// going past a refused schema or a rejected document. Per case ("document" optional) it prints
// one line as soon as the case is done (so the driver can read it through a pipe, "-" = stdin,
// with a timeout): the compile time and error, the document's replay (mask time per token, the
// first token it rejected) and N random masked samples of at most M tokens (the driver
// validates them): per step one allowed token uniformly at random, 70% of the steps among the
// single-byte tokens and EOS only, so that strings and containers end. A schema whose shortest
// document needs more than M tokens is sampled within that least budget ("min_tokens"), as an
// app raises max_new_tokens to it (the runner refuses a smaller one, naming the number).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "rne/json/json.h"
#include "rne/grammar/json_constraint.h"
#include "rne/runner/sampler.h"
#include "rne/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace json = rne::json;

double us_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "rne_json_mask_bench: " << message << "\n";
  std::exit(1);
}

std::string list(const std::vector<double>& values) {
  std::string out = "[";
  char number[32];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(number, sizeof(number), "%s%.1f", i ? "," : "", values[i]);
    out += number;
  }
  return out + "]";
}

// Replays `tokens` through `constraint`; prints the timings as one JSON line.
void replay(rne::grammar::JsonSchemaConstraint& constraint, const rne::grammar::TokenTrie& trie,
            const std::vector<int64_t>& tokens, int64_t eos, int64_t vocab_size,
            size_t case_index, const char* pass) {
  rne::runner::Sampler sampler(rne::runner::SamplerConfig{}, vocab_size);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(vocab_size));
  for (float& l : logits) l = normal(rng);
  std::vector<float> scratch;
  std::vector<double> mask_us, masked_sample_us, plain_sample_us;
  std::vector<int64_t> sequence = tokens;
  sequence.push_back(eos);
  int64_t bytes_left = 0;
  for (int64_t token : tokens) bytes_left += static_cast<int64_t>(trie.bytes(token).size());
  for (int64_t token : sequence) {
    auto start = Clock::now();
    auto mask = constraint.allowed(bytes_left + 1);
    mask_us.push_back(us_since(start));
    if (!mask.ok()) fail("case " + std::to_string(case_index) + ": " + mask.error().message);
    if (!(*mask)->allows(token)) {
      fail("case " + std::to_string(case_index) + ": token " + std::to_string(token) +
           " of the document is not allowed (is the document in the schema's compact form?)");
    }
    scratch = logits;
    start = Clock::now();
    sampler.sample(scratch.data(), {}, *mask);
    masked_sample_us.push_back(us_since(start));
    scratch = logits;
    start = Clock::now();
    sampler.sample(scratch.data(), {});
    plain_sample_us.push_back(us_since(start));
    if (auto accepted = constraint.accept(token); !accepted.ok()) fail(accepted.error().message);
    if (token != eos) bytes_left -= static_cast<int64_t>(trie.bytes(token).size());
  }
  std::cout << "{\"case\":" << case_index << ",\"pass\":\"" << pass
            << "\",\"tokens\":" << sequence.size() << ",\"mask_us\":" << list(mask_us)
            << ",\"masked_sample_us\":" << list(masked_sample_us)
            << ",\"plain_sample_us\":" << list(plain_sample_us)
            << ",\"cached_walks\":" << constraint.cached_walks() << "}" << std::endl;
}

struct ReportOptions {
  int samples = 0;
  int64_t max_tokens = 256;
  uint64_t seed = 1;
};

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// --report: one line per case; a refused schema or rejected document is a result, not a failure.
void report_case(const json::Value& row, const rne::tokenizer::Tokenizer& tokenizer,
                 const std::shared_ptr<const rne::grammar::TokenTrie>& trie, int64_t eos,
                 size_t case_index, const ReportOptions& options) {
  std::string out = "{\"case\":" + std::to_string(case_index);
  auto start = Clock::now();
  auto schema = rne::grammar::compile_json_schema(row.find("schema")->as_string());
  char number[32];
  std::snprintf(number, sizeof(number), "%.1f", us_since(start));
  out += std::string(",\"compile_us\":") + number;
  if (!schema.ok()) {
    out += ",\"error\":";
    json::write_string(schema.error().message, out);
    std::cout << out << "}" << std::endl;
    return;
  }
  rne::grammar::JsonSchemaConstraint constraint(*schema, trie, {eos});
  const json::Value* document = row.find("document");
  if (document && document->is_string()) {
    auto ids = tokenizer.encode(document->as_string(), /*add_special_tokens=*/false);
    std::vector<int64_t> sequence(ids.begin(), ids.end());
    sequence.push_back(eos);
    int64_t bytes_left = 0;
    for (size_t i = 0; i + 1 < sequence.size(); ++i) {
      bytes_left += static_cast<int64_t>(trie->bytes(sequence[i]).size());
    }
    std::vector<double> mask_us;
    int64_t rejected_at = -1;
    std::string error;
    for (size_t i = 0; i < sequence.size() && rejected_at < 0; ++i) {
      start = Clock::now();
      auto mask = constraint.allowed(bytes_left + 1);
      mask_us.push_back(us_since(start));
      if (!mask.ok()) {
        error = mask.error().message;
      } else if (!(*mask)->allows(sequence[i])) {
        error = "token not allowed";
      } else if (auto accepted = constraint.accept(sequence[i]); !accepted.ok()) {
        error = accepted.error().message;
      }
      if (!error.empty()) rejected_at = static_cast<int64_t>(i);
      if (sequence[i] != eos) bytes_left -= static_cast<int64_t>(trie->bytes(sequence[i]).size());
    }
    out += ",\"walk\":{\"tokens\":" + std::to_string(sequence.size()) +
           ",\"rejected_at\":" + std::to_string(rejected_at) + ",\"error\":";
    json::write_string(error, out);
    out += ",\"mask_us\":" + list(mask_us) + "}";
  }
  const int64_t budget = std::max(options.max_tokens, constraint.min_tokens());
  if (budget > options.max_tokens) out += ",\"min_tokens\":" + std::to_string(budget);
  out += ",\"samples\":[";
  std::mt19937_64 rng(options.seed + case_index);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int64_t> all, short_ones;
  for (int s = 0; s < options.samples; ++s) {
    constraint.reset();
    std::string text, error;
    std::vector<double> mask_us;
    bool finished = false;
    for (int64_t step = 0; step < budget && !finished && error.empty(); ++step) {
      start = Clock::now();
      auto mask = constraint.allowed(budget - step);
      mask_us.push_back(us_since(start));
      if (!mask.ok()) {
        error = mask.error().message;
        break;
      }
      all.clear();
      short_ones.clear();
      const auto& words = (*mask)->words;
      for (size_t w = 0; w < words.size(); ++w) {
        for (uint64_t bits = words[w]; bits; bits &= bits - 1) {
          const auto id = static_cast<int64_t>(w * 64 + __builtin_ctzll(bits));
          all.push_back(id);
          if (id == eos || trie->bytes(id).size() == 1) short_ones.push_back(id);
        }
      }
      if (all.empty()) {
        error = "empty mask";
        break;
      }
      const auto& pool = !short_ones.empty() && unit(rng) < 0.7 ? short_ones : all;
      const int64_t token = pool[static_cast<size_t>(unit(rng) * pool.size()) % pool.size()];
      if (auto accepted = constraint.accept(token); !accepted.ok()) {
        error = accepted.error().message;
      } else if (token == eos) {
        finished = true;
      } else {
        text += trie->bytes(token);
      }
    }
    out += std::string(s ? "," : "") + "{\"hex\":\"" + hex(text) + "\",\"finished\":" +
           (finished ? "true" : "false") + ",\"error\":";
    json::write_string(error, out);
    out += ",\"mask_us\":" + list(mask_us) + "}";
  }
  std::cout << out << "]}" << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, cases_path;
  bool report = false;
  ReportOptions options;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--report") {
      report = true;
      --i;  // takes no value
      continue;
    }
    if (i + 1 >= argc) fail(flag + " needs a value");
    if (flag == "--samples" || flag == "--max-tokens" || flag == "--seed") {
      char* end = nullptr;
      const long long value = std::strtoll(argv[i + 1], &end, 10);
      if (*end != '\0' || value < 0) fail(flag + " needs a non-negative integer");
      if (flag == "--samples") options.samples = static_cast<int>(value);
      if (flag == "--max-tokens") options.max_tokens = value;
      if (flag == "--seed") options.seed = static_cast<uint64_t>(value);
    } else if (flag == "--tokenizer") {
      tokenizer_path = argv[i + 1];
    } else if (flag == "--cases") {
      cases_path = argv[i + 1];
    } else {
      fail("unknown option " + flag);
    }
  }
  if (tokenizer_path.empty() || cases_path.empty()) {
    fail("usage: rne_json_mask_bench --tokenizer tokenizer.json --cases cases.jsonl|- [--report "
         "[--samples N] [--max-tokens M] [--seed S]]");
  }
  auto tokenizer = rne::tokenizer::Tokenizer::from_file(tokenizer_path);
  if (!tokenizer.ok()) fail(tokenizer.error().message);
  const auto vocab_size = static_cast<int64_t>(tokenizer.value().vocab_size());
  const int64_t eos = vocab_size;  // an id past the tokenizer: EOS for the replay
  auto start = Clock::now();
  auto bytes = rne::grammar::token_byte_strings(tokenizer.value(), vocab_size + 1);
  const double bytes_ms = us_since(start) / 1000;
  start = Clock::now();
  auto trie = rne::grammar::TokenTrie::build(std::move(bytes));
  std::cout << "{\"vocab_size\":" << vocab_size + 1 << ",\"token_bytes_ms\":" << bytes_ms
            << ",\"trie_build_ms\":" << us_since(start) / 1000
            << ",\"trie_nodes\":" << trie->nodes().size() << "}" << std::endl;

  std::ifstream file;
  if (cases_path != "-") {
    file.open(cases_path);
    if (!file) fail("cannot read " + cases_path);
  }
  std::istream& cases = cases_path == "-" ? std::cin : file;
  std::string line;
  for (size_t index = 0; std::getline(cases, line); ++index) {
    auto parsed = json::parse(line);
    const json::Value row = parsed.ok() ? std::move(parsed).value() : json::Value();
    if (report && row.find("schema") && row.find("schema")->is_string()) {
      report_case(row, tokenizer.value(), trie, eos, index, options);
      continue;
    }
    if (!parsed.ok() || !row.find("schema") || !row.find("document") ||
        !row.find("schema")->is_string() || !row.find("document")->is_string()) {
      fail(cases_path + " line " + std::to_string(index + 1) +
           ": expected {\"schema\": \"<schema JSON text>\", \"document\": \"...\"}");
    }
    auto schema = rne::grammar::compile_json_schema(row.find("schema")->as_string());
    if (!schema.ok()) fail("case " + std::to_string(index) + ": " + schema.error().message);
    const std::string& document = row.find("document")->as_string();
    auto ids = tokenizer.value().encode(document, /*add_special_tokens=*/false);
    std::vector<int64_t> tokens(ids.begin(), ids.end());
    rne::grammar::JsonSchemaConstraint constraint(*schema, trie, {eos});
    replay(constraint, *trie, tokens, eos, vocab_size + 1, index, "cold");
    constraint.reset();
    replay(constraint, *trie, tokens, eos, vocab_size + 1, index, "warm");
  }
  return 0;
}

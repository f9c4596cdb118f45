// A seeded mutation fuzzer over the core's parsers of untrusted input: each case is a seed (a
// built-in one or a file given with --seeds) changed by a few random edits, and is fed to the
// parser through its public header. Deterministic for a given --seed, bounded by --cases and
// --seconds. It prints one line of counts:
//   fuzz gbnf: cases 4000, clean errors 3100, accepted 900, unclear 0, crashes 0, hangs 0, 9.8 s
// A crash (a signal, or any sanitizer report: every one is fatal in build/sanitize) or a hang
// (a case over --hang-seconds) ends the run with a non-zero status after writing the input to
// --save-dir. With --fork each case runs in a child process, so a run counts every crashing and
// hanging case instead of stopping at the first (how the faults of issue #63 were counted).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include "rne/chat/chat_template.h"
#include "rne/json/json.h"
#include "rne/media/audio.h"
#include "rne/media/image.h"
#include "rne/grammar/gbnf.h"
#include "rne/grammar/json_schema.h"
#include "rne/runner/program_check.h"
#include "rne/grammar/regex.h"
#include "rne/tokenizer/tokenizer.h"

namespace {

enum class Outcome { kAccepted, kError, kUnclear };

template <typename R>
Outcome outcome_of(const R& result) {
  if (result.ok()) return Outcome::kAccepted;
  return result.error().message.empty() ? Outcome::kUnclear : Outcome::kError;
}

using Bytes = std::string;
using Rng = std::mt19937_64;

struct Target {
  const char* name;
  bool text;                                   // its input is text (dictionary edits, nesting)
  std::vector<Bytes> seeds;                    // built in; --seeds adds files
  std::vector<Bytes> dictionary;               // tokens inserted whole
  std::vector<std::pair<Bytes, Bytes>> nests;  // open/close pairs nested up to kMaxNest deep
  Outcome (*run)(std::string_view);
};

const uint8_t* bytes_of(std::string_view input) {
  return reinterpret_cast<const uint8_t*>(input.data());
}

Outcome run_image(std::string_view input) {
  // A smaller pixel budget than the default keeps each case fast; the checks are the same.
  rne::media::DecodeLimits limits;
  limits.max_pixels = 4'000'000;
  const auto size = rne::media::image_size(bytes_of(input), input.size(), limits);
  const auto image = rne::media::decode_image(bytes_of(input), input.size(), limits);
  if (size.ok() != image.ok() && image.ok()) return Outcome::kUnclear;  // decoded past a refusal
  return outcome_of(image);
}

Outcome run_wav(std::string_view input) {
  return outcome_of(rne::media::decode_wav(bytes_of(input), input.size()));
}

Outcome run_gbnf(std::string_view input) {
  auto grammar = rne::grammar::compile_gbnf(std::string(input));
  if (grammar.ok()) {
    // The matcher walks what the compiler built: a sample of bytes through it.
    rne::grammar::GbnfMatcher matcher(*grammar);
    auto state = matcher.start();
    if (state.ok()) {
      rne::grammar::GbnfState next;
      for (char c : std::string("{\"a\": [1, true]} yes")) {
        if (matcher.step(*state, static_cast<uint8_t>(c), next) !=
            rne::grammar::GbnfMatcher::Step::kOk) {
          break;
        }
        *state = next;
      }
    }
  }
  return outcome_of(grammar);
}

Outcome run_json_schema(std::string_view input) {
  const auto json = rne::grammar::compile_json_schema(input);
  const auto gemma = rne::grammar::compile_json_schema(input, rne::grammar::JsonSyntax::kGemma4);
  return json.ok() || gemma.ok() ? Outcome::kAccepted
                                 : std::max(outcome_of(json), outcome_of(gemma));
}

Outcome run_regex(std::string_view input) {
  const auto whole = rne::grammar::compile_regex({std::string(input)}, false);
  const auto search = rne::grammar::compile_regex({std::string(input)}, true, 1, 64);
  const auto format = rne::grammar::compile_regex_format(input);
  if (whole.ok()) whole->matches("abc123-_ xyz");
  return std::max({outcome_of(whole), outcome_of(search), outcome_of(format)});
}

const rne::json::Value& conversation() {
  static const rne::json::Value messages = rne::json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <b>"},)"
      R"({"role":"assistant","content":"Hello.","tool_calls":[{"function":{"name":"f",)"
      R"("arguments":{"x":1}}}]},{"role":"tool","content":"42"},)"
      R"({"role":"user","content":[{"type":"text","text":"2+2?"},{"type":"image"}]}])").value();
  return messages;
}

Outcome run_template(std::string_view input) {
  auto chat = rne::chat::ChatTemplate::from_source(input);
  if (!chat.ok()) return outcome_of(chat);
  rne::chat::RenderOptions options;
  options.add_generation_prompt = true;
  return outcome_of(chat->render(conversation(), options));
}

Outcome run_program(std::string_view input) {
  return outcome_of(rne::runner::check_program(bytes_of(input), input.size(), "fuzz.pte"));
}

Outcome run_tokenizer(std::string_view input) {
  auto tokenizer = rne::tokenizer::Tokenizer::from_json(input);
  if (tokenizer.ok()) {
    const auto ids = tokenizer.value().encode("Hello, world! <s> zażółć 漢字 🙂\n  x");
    (void)tokenizer.value().decode(ids);
  }
  return outcome_of(tokenizer);
}

// Smallest valid inputs, so each target fuzzes something even without --seeds.
const char kGbnf[] = R"(root ::= "{" ws pair ("," ws pair)* "}"
pair ::= string ":" ws value
value ::= string | [0-9]+ ("." [0-9]{1,3})? | "true" | "false" | "[" (value ("," value)*)? "]"
string ::= "\"" ([^"\\] | "\\" .)* "\""
ws ::= [ \t\n]*
)";
const char kSchema[] = R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
"n":{"type":"integer","minimum":0,"maximum":99},"tags":{"type":"array","items":{"enum":["a","b"]},
"maxItems":3},"x":{"anyOf":[{"type":"number","multipleOf":0.5},{"type":"null"}]},
"s":{"type":"string","pattern":"^[a-z]+-[0-9]{2}$"}},"required":["name"],
"additionalProperties":false})";
const char kTemplate[] = R"({%- for m in messages -%}
{%- if m.role == 'system' %}<<SYS>>{{ m.content | trim }}<</SYS>>
{% elif m.content is string %}{{ '<|' ~ m.role ~ '|>' }}{{ m.content }}{% else -%}
{%- for part in m.content %}{% if part.type == 'text' %}{{ part.text }}{% else %}<img>{% endif %}
{%- endfor %}{% endif %}{% if m.tool_calls is defined %}{{ m.tool_calls | tojson }}{% endif %}
{%- endfor %}{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}
{{- f(3) }}{% set ns = namespace(k=0) %}{% for i in range(3) %}{% set ns.k = ns.k + i %}{% endfor %}
{{ ns.k }}{{ "%s-%d" | format("a", 2) }}{{ messages[1:3] | length }}{{ 'x' * 3 }}
{%- if add_generation_prompt %}<|assistant|>{% endif %})";
const char kTokenizer[] = R"({"version":"1.0","added_tokens":[{"id":5,"content":"<s>",
"single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
"normalizer":{"type":"NFC"},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,
"use_regex":true},"post_processor":null,"decoder":{"type":"ByteLevel"},
"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,
"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,
"vocab":{"H":0,"e":1,"l":2,"o":3,"He":4,"<s>":5,"ll":6,"Hell":7},"merges":["H e","l l","He ll"]}})";

Bytes le32(uint32_t v) {
  return Bytes{static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
               static_cast<char>(v >> 24)};
}

Bytes tiny_wav() {
  Bytes samples;
  for (int i = 0; i < 64; ++i) samples += Bytes{static_cast<char>(i * 7), static_cast<char>(i)};
  Bytes fmt = le32(16) + Bytes("\x01\x00\x01\x00", 4) + le32(16000) + le32(32000) +
              Bytes("\x02\x00\x10\x00", 4);
  Bytes body = "WAVEfmt " + fmt + "LIST" + le32(4) + "INFO" + "data" + le32(samples.size()) +
               samples;
  return "RIFF" + le32(body.size()) + body;
}

std::vector<Target> targets() {
  const std::vector<std::pair<Bytes, Bytes>> brackets = {{"(", ")"}, {"[", "]"}, {"{", "}"}};
  return {
      {"png", false, {}, {"IHDR", "IDAT", "IEND", "PLTE", "tRNS", "\xff\xff\xff\xff"}, {},
       run_image},
      {"jpeg", false, {}, {"\xff\xc0", "\xff\xc2", "\xff\xc4", "\xff\xda", "\xff\xdb", "\xff\xdd",
                           "\xff\xd9", "\xff\xff"}, {}, run_image},
      {"wav", false, {tiny_wav()}, {"RIFF", "WAVE", "fmt ", "data", "\xfe\xff", "\xff\xff\xff\xff"},
       {}, run_wav},
      {"gbnf", true, {kGbnf, "root ::= [a-z]{2,5} | \"x\"? \"y\"+"},
       {"::=", "|", "*", "+", "?", "{0,}", "{3}", "[^", "]", "\\x", "\\u", "\\\"", "#", "\n",
        "root", "a ::= b\nb ::= a\n", "\"", "."},
       {{"(", ")"}, {"(\"a\" ", ")*"}}, run_gbnf},
      {"json_schema", true, {kSchema, "{}", R"({"type":"array","items":{"$ref":"#"}})"},
       {"\"type\"", "\"object\"", "\"string\"", "\"integer\"", "\"$ref\"", "\"#\"", "\"anyOf\"",
        "\"allOf\"", "\"enum\"", "\"pattern\"", "\"minLength\"", "1e308", "-0", ":", ",",
        "\"multipleOf\"", "0.1", "\"format\"", "\"date-time\""},
       {{"{\"items\":", "}"}, {"{\"anyOf\":[", "]}"}, {"[", "]"}}, run_json_schema},
      {"regex", true, {"[a-z]+-[0-9]{2,4}(\\.[a-z]+)?", "(ab|cd)*x?\\d\\w\\s.", "^a$"},
       {"*", "+", "?", "{1000}", "{2,}", "|", "[^", "]", "\\", "\\u00e9", "(?:", "^", "$", "."},
       {{"(", ")"}, {"(a|", ")*"}, {"(?:", ")+"}}, run_regex},
      {"template", true, {kTemplate},
       {"{{", "}}", "{%", "%}", "{#", "#}", "for", "endfor", "if", "endif", "macro", "endmacro",
        "range(", "loop.", "|", "~", "*", "**", "[", "]", "(", ")", "'", "namespace(", "set "},
       {{"{% if 1 %}", "{% endif %}"}, {"(", ")"}, {"[", "]"}, {"{{ [", "] }}"}}, run_template},
      {"program", false, {}, {"ET12", "\xff\xff\xff\xff", "\x00\x00\x00\x80"}, {}, run_program},
      {"tokenizer", true, {kTokenizer},
       {"\"model\"", "\"type\"", "\"BPE\"", "\"WordPiece\"", "\"Sequence\"", "\"Split\"",
        "\"pattern\"", "\"Regex\"", "\"vocab\"", "\"merges\"", "\"added_tokens\"", "null", "-1",
        "4294967296", "\"\\u0000\""},
       {{"{\"type\":\"Sequence\",\"normalizers\":[", "]}"}, {"[", "]"}}, run_tokenizer},
  };
}

// --- mutation ---------------------------------------------------------------------------

constexpr size_t kMaxBinary = 1 << 20;
constexpr size_t kMaxText = 1 << 18;
constexpr size_t kMaxNest = 20000;

size_t below(Rng& rng, size_t n) { return n == 0 ? 0 : rng() % n; }

void mutate_once(Bytes& data, Rng& rng, const Target& target, const std::vector<Bytes>& seeds,
                 size_t cap) {
  static const uint32_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x10000, 0x7fffffff,
                                          0x80000000, 0xffffffff, 65500, 16, 4096};
  const size_t at = below(rng, data.size() + 1);
  switch (rng() % 10) {
    case 0:  // flip bits
      if (!data.empty()) data[below(rng, data.size())] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:  // an interesting byte
      if (!data.empty()) data[below(rng, data.size())] = static_cast<char>(kInteresting[rng() % 5]);
      break;
    case 2: {  // an interesting 16- or 32-bit value, either byte order
      const uint32_t v = kInteresting[rng() % std::size(kInteresting)];
      const int width = rng() % 2 ? 4 : 2;
      const bool big = rng() % 2;
      if (data.size() < static_cast<size_t>(width)) break;
      const size_t pos = below(rng, data.size() - width + 1);
      for (int i = 0; i < width; ++i) {
        const int shift = 8 * (big ? width - 1 - i : i);
        data[pos + i] = static_cast<char>(v >> shift);
      }
      break;
    }
    case 3:  // truncate
      data.resize(below(rng, data.size() + 1));
      break;
    case 4: {  // delete a range
      const size_t n = std::min(data.size() - std::min(at, data.size()), 1 + below(rng, 64));
      data.erase(std::min(at, data.size()), n);
      break;
    }
    case 5: {  // duplicate a range, maybe many times
      if (data.empty()) break;
      const size_t from = below(rng, data.size());
      const size_t n = std::min(data.size() - from, 1 + below(rng, 256));
      const Bytes piece = data.substr(from, n);
      const size_t times = rng() % 4 == 0 ? 1 + below(rng, 64) : 1;
      for (size_t i = 0; i < times; ++i) data.insert(at, piece);
      break;
    }
    case 6: {  // random bytes
      Bytes noise(1 + below(rng, 16), '\0');
      for (char& c : noise) c = static_cast<char>(rng());
      data.insert(at, noise);
      break;
    }
    case 7:  // a dictionary token
      if (!target.dictionary.empty()) {
        data.insert(at, target.dictionary[below(rng, target.dictionary.size())]);
      }
      break;
    case 8: {  // splice: a piece of another seed
      const Bytes& other = seeds[below(rng, seeds.size())];
      if (other.empty()) break;
      const size_t from = below(rng, other.size());
      data.insert(at, other.substr(from, 1 + below(rng, other.size() - from)));
      break;
    }
    case 9: {  // deep nesting: the parsers' recursion and depth limits
      if (target.nests.empty()) break;
      const auto& [open, close] = target.nests[below(rng, target.nests.size())];
      const size_t depth = size_t{1} << below(rng, 15);  // 1 .. 16384
      const size_t end = at + below(rng, data.size() - at + 1);
      Bytes closes;
      for (size_t i = 0; i < std::min(depth, kMaxNest); ++i) closes += close;
      data.insert(end, closes);
      Bytes opens;
      for (size_t i = 0; i < std::min(depth, kMaxNest); ++i) opens += open;
      data.insert(at, opens);
      break;
    }
  }
  if (data.size() > cap) data.resize(cap);
}

Bytes make_case(Rng& rng, const Target& target, const std::vector<Bytes>& seeds, size_t cap) {
  Bytes data = seeds[below(rng, seeds.size())];
  // Most cases stay close to a valid input, so they reach past the first check.
  const int edits = 1 + static_cast<int>(rng() % 8 == 0 ? below(rng, 16) : below(rng, 3));
  for (int i = 0; i < edits; ++i) mutate_once(data, rng, target, seeds, cap);
  return data;
}

// --- running ----------------------------------------------------------------------------

std::string g_save_dir;
const Bytes* g_current = nullptr;
std::string g_target;

void save_current(const char* what) {
  if (g_save_dir.empty() || g_current == nullptr) return;
  const std::string path = g_save_dir + "/" + g_target + "-" + what;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < g_current->size()) {
    const ssize_t n = ::write(fd, g_current->data() + done, g_current->size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  const char note[] = "rne_fuzz: the input is saved in --save-dir\n";
  (void)!::write(2, note, sizeof(note) - 1);
}

#if defined(__SANITIZE_ADDRESS__)
void on_death() { save_current("crash"); }
#else
void on_signal(int sig) {
  save_current("crash");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
#endif

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "rne_fuzz: " << why << "\n"
            << "usage: rne_fuzz TARGET [--cases N] [--seconds S] [--seed N] [--seeds PATH]...\n"
               "                [--hang-seconds S] [--save-dir DIR] [--fork]\n"
               "targets:";
  for (const auto& t : targets()) std::cerr << " " << t.name;
  std::cerr << "\n";
  std::exit(2);
}

Bytes read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage("name a target");
  g_target = argv[1];
  size_t max_cases = 1'000'000;
  double seconds = 10;
  double hang_seconds = 10;
  uint64_t seed = 63;
  bool fork_each = false;
  std::vector<std::string> seed_paths;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--cases") max_cases = std::stoull(value());
    else if (arg == "--seconds") seconds = std::stod(value());
    else if (arg == "--seed") seed = std::stoull(value());
    else if (arg == "--seeds") seed_paths.push_back(value());
    else if (arg == "--hang-seconds") hang_seconds = std::stod(value());
    else if (arg == "--save-dir") g_save_dir = value();
    else if (arg == "--fork") fork_each = true;
    else usage("unknown option " + arg);
  }
  const auto all = targets();
  const auto found = std::find_if(all.begin(), all.end(),
                                  [&](const Target& t) { return g_target == t.name; });
  if (found == all.end()) usage("unknown target " + g_target);
  const Target& target = *found;

  std::vector<Bytes> seeds = target.seeds;
  for (const auto& path : seed_paths) {
    if (std::filesystem::is_directory(path)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());  // the order, and so the run, is reproducible
      for (const auto& file : files) seeds.push_back(read_file(file));
    } else {
      seeds.push_back(read_file(path));
    }
  }
  if (seeds.empty()) usage(std::string("target ") + target.name + " needs --seeds (no built-in)");
  // Cases may grow to the larger of the cap and twice the largest seed (a .pte is megabytes).
  size_t cap = target.text ? kMaxText : kMaxBinary;
  for (const auto& s : seeds) cap = std::max(cap, 2 * s.size());

#if defined(__SANITIZE_ADDRESS__)
  // ASan's own handlers report signals (a stack overflow too, on their alternate stack) and then
  // call this.
  __sanitizer_set_death_callback(on_death);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::signal(sig, on_signal);
#endif

  // The watchdog: a case running past --hang-seconds is a hang.
  std::atomic<int64_t> case_started_ms{-1};
  const auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  if (!fork_each) {
    std::thread([&] {
      while (true) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const int64_t started = case_started_ms.load();
        if (started >= 0 && now_ms() - started > hang_seconds * 1000) {
          save_current("hang");
          std::fprintf(stderr, "fuzz %s: a case ran over %.0f s: hangs 1\n", target.name,
                       hang_seconds);
          std::_Exit(3);
        }
      }
    }).detach();
  }

  Rng rng(seed);
  size_t cases = 0, errors = 0, accepted = 0, unclear = 0, crashes = 0, hangs = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // Every seed unchanged first, then mutations.
  for (size_t n = 0; n < max_cases && elapsed() < seconds; ++n) {
    const Bytes input = n < seeds.size() ? seeds[n] : make_case(rng, target, seeds, cap);
    g_current = &input;
    // The parser reads a heap block of exactly the input's size (a std::string has spare
    // capacity and a terminator), so the sanitizer sees any read past its end.
    const std::unique_ptr<char[]> exact(new char[std::max<size_t>(input.size(), 1)]);
    std::memcpy(exact.get(), input.data(), input.size());
    const std::string_view view(exact.get(), input.size());
    ++cases;
    Outcome outcome;
    if (fork_each) {
      std::fflush(nullptr);
      const pid_t child = ::fork();
      if (child == 0) {
        ::alarm(static_cast<unsigned>(std::max(1.0, hang_seconds)));
        if (!g_save_dir.empty()) {
          const std::string log = g_save_dir + "/" + target.name + "-case" + std::to_string(n) +
                                  ".log";
          const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
          if (fd >= 0) ::dup2(fd, 2);
        }
        std::_Exit(10 + static_cast<int>(target.run(view)));
      }
      int status = 0;
      ::waitpid(child, &status, 0);
      const std::string log = g_save_dir + "/" + target.name + "-case" + std::to_string(n);
      const bool clean =
          WIFEXITED(status) && WEXITSTATUS(status) >= 10 && WEXITSTATUS(status) <= 12;
      if (clean) {
        outcome = static_cast<Outcome>(WEXITSTATUS(status) - 10);
        if (!g_save_dir.empty()) std::filesystem::remove(log + ".log");
      } else {
        const bool hung = WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
        ++(hung ? hangs : crashes);
        if (!g_save_dir.empty()) {
          std::ofstream(log + (hung ? ".hang" : ".crash"), std::ios::binary) << input;
        }
        continue;
      }
    } else {
      case_started_ms = now_ms();
      outcome = target.run(view);
      case_started_ms = -1;
    }
    ++(outcome == Outcome::kAccepted ? accepted : outcome == Outcome::kError ? errors : unclear);
  }
  g_current = nullptr;
  std::printf("fuzz %s: cases %zu, clean errors %zu, accepted %zu, unclear %zu, crashes %zu, "
              "hangs %zu, %.1f s (seed %llu, %zu seeds)\n",
              target.name, cases, errors, accepted, unclear, crashes, hangs, elapsed(),
              static_cast<unsigned long long>(seed), seeds.size());
  return crashes == 0 && hangs == 0 ? 0 : 1;
}

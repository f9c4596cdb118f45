// rne_llm: runs a .pte chat model on the host. Streams the answer to stdout and prints the
// stats to stderr (or, with --json, prints one JSON object for scripts and tests).
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <executorch/runtime/platform/platform.h>

#include "rne/json/file.h"
#include "rne/chat/chat_template.h"
#include "rne/chat/gemma4_syntax.generated.h"
#include "rne/json/json.h"
#include "cli_options.h"
#include "model_integrity.h"
#include "seam_core.h"
#include "rne/runner/llm_runner.h"
#include "rne/runner/session_file.h"
#include "rne/runner/speculative_options.h"
#ifdef RNE_WITH_MEDIA
#include "rne/media/media_embedder.h"
#endif
#include "rne/tokenizer/tokenizer.h"

namespace {

using rne::runner::GenerationConfig;
using rne::runner::LlmRunner;
using rne::runner::Stats;

constexpr const char* kUsage = R"(usage: rne_llm --model FILE.pte --tokenizer tokenizer.json [options] PROMPT...

Runs a chat model exported by tools/export_model.py. The prompt is wrapped in the model's chat
template, found as transformers finds it next to tokenizer.json (chat_template.jinja, then
tokenizer_config.json's "chat_template"), or in --tokenizer-config's directory.

options:
  --tokenizer-config FILE   tokenizer_config.json holding the chat template (a
                            chat_template.jinja beside it takes precedence)
  --system TEXT             system message (default: the template's own, if it has one)
  --raw                     send PROMPT as is (tokenizer post-processor applied, no template)
  --prompt-ids 1,2,3        send these token ids instead of a text prompt
  --image FILE              a JPEG or PNG placed before the prompt in the user message
                            (repeatable; the template's image placeholder becomes the image's
                            soft tokens). Needs --vision-encoder and a model that takes media
  --vision-encoder FILE     the vision encoder program (tools/export_encoder.py)
  --audio FILE              a 16 kHz mono WAV clip placed after the images (repeatable; the
                            template's audio placeholder becomes the clip's soft tokens). Needs
                            --audio-encoder
  --audio-encoder FILE      the audio encoder program (tools/export_encoder.py --encoder audio)
  --interactive             chat on stdin after the first answer; each turn re-renders the whole
                            conversation and the KV cache keeps the prefix it shares
  --load-session FILE       continue the conversation saved in FILE (rne_llm --save-session, the
                            app's saveSession) before the first turn; needs --prompt-ids or --raw
                            (their tokens are appended to it as they are)
  --save-session FILE       save the conversation to FILE after the last turn (docs/design.md,
                            "Session files")
  --session-tokens-only     --save-session writes the tokens only (a small file; loading it
                            prefills them again instead of copying the caches back)
  --turn-ids 1,2,3          after the answer, one more turn with these ids appended to the
                            conversation (repeatable)
  --logits-out FILE         write, per turn, the logits of its last forward call (float32,
                            vocab_size per row): with --max-new-tokens 1 those the answer was
                            sampled from. For the session exactness tests
  --sha256 HEX              verify the model file against this sha256 (the registry's) before
                            loading it; a mismatch is a "corrupt file" error. Without it, the
                            sha256 in the exporter's MODEL.report.json next to the file is used
                            when there is one (a report that cannot be used is an error). A
                            success is remembered (RNE_CACHE_DIR, else ~/.cache/rne) until the
                            file changes. The model is read into memory once: the bytes checked
                            are the bytes that run, whatever happens to the file afterwards
  --max-new-tokens N        default 256; 0 = until EOS or the context is full
  --temperature T           default 0 (greedy)
  --top-k K --top-p P --min-p P --repetition-penalty R --seed S
  --stop TEXT               stop when TEXT appears (repeatable)
  --json-schema FILE        answer with one JSON document valid against this JSON Schema
                            (grammar-constrained sampling; supported keywords: see
                            grammar/include/rne/grammar/json_schema.h)
  --json-syntax json|gemma4 how the --json-schema document is written: JSON (default) or Gemma 4's
                            tool-call argument syntax ({key:<|"|>text<|"|>,n:3}, see json_schema.h)
  --json-strict             refuse the --json-schema's unknown keywords and formats instead of
                            ignoring them as annotations (nothing in the schema goes unenforced)
  --regex REGEX             answer with text that matches REGEX as a whole (grammar-constrained
                            sampling; the subset in grammar/include/rne/grammar/regex.h)
  --grammar FILE            answer with a sentence of the GBNF grammar in FILE (its `root` rule;
                            the syntax in grammar/include/rne/grammar/gbnf.h)
  --speculative prompt-lookup|assistant
                            speculative decoding: the drafter proposes the next tokens and one
                            forward verifies them all; the answer is the one without it, in fewer
                            forwards (default: off). prompt-lookup copies what followed an earlier
                            occurrence of the latest n-gram; assistant is the model's own drafter
  --max-draft-tokens N      tokens drafted per forward (default 0 = as many as the model verifies)
  --ngram-max N --ngram-min N
                            prompt lookup's longest and shortest n-gram (default: the runner's,
                            SpeculativeConfig in runner/include/rne/runner/text_generator.h)
  --ignore-eos              keep generating past EOS (benchmarks)
  --json                    print one JSON object (text, token ids, stats) instead of streaming
  --list-backends           print the ExecuTorch backends compiled in, then exit
Ctrl-C interrupts the generation in progress.
)";

std::atomic<LlmRunner*> g_runner{nullptr};

// A JSON Schema file is a few KB; this bounds what is read before it is parsed.
constexpr size_t kMaxSchemaFileBytes = size_t{16} << 20;

// The runtime logs CPU probing and similar at Info level on every load; a CLI whose stdout is
// the answer shows only warnings and errors (RNE_VERBOSE=1 shows everything).
void emit_runtime_log(et_timestamp_t, et_pal_log_level_t level, const char* filename,
                      const char*, size_t line, const char* message, size_t length) {
  static const bool verbose = std::getenv("RNE_VERBOSE") != nullptr;
  if (!verbose && (level == kDebug || level == kInfo)) return;
  std::fprintf(stderr, "executorch %c %s:%zu] %.*s\n", static_cast<char>(level), filename, line,
               static_cast<int>(length), message);
}

void on_sigint(int) {
  if (LlmRunner* runner = g_runner.load()) runner->interrupt();
}

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "rne_llm: " << message << "\n";
  std::exit(1);
}

struct Options {
  std::string model, tokenizer, tokenizer_config, system, prompt, prompt_ids, sha256;
  std::string vision_encoder, audio_encoder;
  std::vector<std::string> images, audios;
  std::string load_session, save_session, logits_out;
  bool session_tokens_only = false;
  std::vector<std::string> turn_ids;  // --turn-ids, in order
  bool raw = false, interactive = false, json = false, list_backends = false;
  GenerationConfig generation;
};

template <typename T>
T parse_number(const std::string& flag, const std::string& text) {
  std::istringstream in(text);
  T value;
  // An istream reads "-1" into an unsigned type as a huge number: a sign is refused there.
  const bool sign_in_unsigned = std::is_unsigned_v<T> && text.find('-') != std::string::npos;
  if (sign_in_unsigned || !(in >> value) || !in.eof()) {
    fail(flag + " expects a number" + (std::is_integral_v<T> ? " (an integer in range)" : "") +
         ", got '" + text + "'");
  }
  return value;
}

void require_utf8(std::string_view text, const std::string& what) {
  if (auto valid = rne::runner::check_utf8(text, what); !valid.ok()) fail(valid.error().message);
}

// How rne_llm spells the seam's generation options (seam_core.cpp, kGenerationOptions) where
// its flags predate the table; every other row is its JS name in kebab case (topP -> --top-p),
// so a new option is a flag without an edit here.
const std::map<std::string, std::string> kFlagSpelling = {
    {"stopStrings", "--stop"},         {"responseFormat", "--json-schema"},
    {"responseRegex", "--regex"},      {"responseGrammar", "--grammar"},
    {"responseSyntax", "--json-syntax"}, {"responseStrict", "--json-strict"},
    {"drafter", "--speculative"},
};

std::string flag_for(const char* option) {
  const auto spelled = kFlagSpelling.find(option);
  return spelled != kFlagSpelling.end() ? spelled->second : "--" + rne::seam::kebabCase(option);
}

// A file's content as a flag's text: a JSON Schema or a grammar is given as a file.
std::string read_flag_file(const std::string& flag, const std::string& path, size_t max_bytes,
                           const std::string& expected) {
  auto content = rne::json::read_regular_file(path, max_bytes);
  if (!content.ok()) fail(flag + ": " + content.error().message + " (expected " + expected + ")");
  return std::move(content).value();
}

// What a generation flag's value becomes before the table's row reads it: the text itself,
// except for the options given as a file. An empty schema, grammar or pattern would read as "no
// constraint" further on: refused here, where it is still known that one was asked for.
std::string generation_flag_text(const std::string& option, const std::string& flag,
                                 const std::string& value) {
  if (option == "responseFormat") {
    std::string schema = read_flag_file(flag, value, kMaxSchemaFileBytes, "a JSON Schema file");
    if (schema.empty()) {
      fail(flag + ": " + value + " is empty (expected a JSON Schema file; {} allows any JSON "
           "value)");
    }
    return schema;
  }
  if (option == "responseGrammar") {
    std::string grammar =
        read_flag_file(flag, value, rne::grammar::kMaxGbnfBytes, "a GBNF grammar file");
    if (grammar.empty()) {
      fail(flag + ": " + value + " is empty (expected a GBNF grammar with a `root ::= ...` "
           "rule)");
    }
    return grammar;
  }
  if (option == "responseRegex" && value.empty()) {
    fail(flag + ": the pattern is empty, which allows only an empty answer; give a pattern "
         "(.* allows any text), or leave " + flag + " out");
  }
  return value;
}

// --help: kUsage, then the table's options it does not describe (one added since).
void print_usage() {
  std::cout << kUsage;
  const std::string usage = kUsage;
  for (const auto& row : rne::seam::generationOptionsAsText()) {
    const std::string flag = flag_for(row.name);
    if (usage.find(flag + " ") != std::string::npos || usage.find(flag + "\n") != std::string::npos) {
      continue;
    }
    std::cout << "  " << flag << (row.takes_value ? " VALUE" : "")
              << "  generate()'s " << row.name << " (src/native/seam.ts)\n";
  }
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> words;
  bool json_syntax_given = false;
  rne::host::CliOptions cli;
  cli.action("--help", [] { print_usage(); std::exit(0); })
      .action("-h", [] { print_usage(); std::exit(0); })
      .text("--model", o.model)
      .text("--tokenizer", o.tokenizer)
      .text("--tokenizer-config", o.tokenizer_config)
      .text("--system", o.system)
      .text("--vision-encoder", o.vision_encoder)
      .value("--image", [&](const std::string& v) { o.images.push_back(v); })
      .text("--audio-encoder", o.audio_encoder)
      .value("--audio", [&](const std::string& v) { o.audios.push_back(v); })
      .text("--prompt-ids", o.prompt_ids)
      .text("--load-session", o.load_session)
      .text("--save-session", o.save_session)
      .flag("--session-tokens-only", o.session_tokens_only)
      .value("--turn-ids", [&](const std::string& v) { o.turn_ids.push_back(v); })
      .text("--logits-out", o.logits_out)
      .flag("--raw", o.raw)
      .flag("--interactive", o.interactive)
      .flag("--json", o.json)
      .flag("--list-backends", o.list_backends)
      .flag("--ignore-eos", o.generation.stop_on_eos, false)
      .value("--sha256",
             [&](const std::string& v) {
               if (!rne::host::is_sha256_hex(v)) {
                 fail("--sha256 expects 64 hex digits (the file's sha256), got '" + v + "'");
               }
               o.sha256 = v;
             })
      .words(words);
  for (const auto& row : rne::seam::generationOptionsAsText()) {
    const std::string option = row.name;
    const std::string flag = flag_for(row.name);
    auto apply = [&o, &json_syntax_given, row, option, flag](const std::string& value) {
      const std::string text = generation_flag_text(option, flag, value);
      if (auto parsed = row.parse(flag, text, o.generation); !parsed.ok()) {
        fail(parsed.error().message);
      }
      if (option == "responseSyntax") json_syntax_given = true;
    };
    if (row.takes_value) {
      cli.value(flag, apply);
    } else {
      cli.action(flag, [apply] { apply(""); });
    }
  }
  if (auto problem = cli.parse(argc, argv)) fail(*problem + " (see --help)");
  // Checked here, with the flag's own words, before validate() words them for the seam.
  if (o.generation.max_new_tokens < 0) {
    fail("--max-new-tokens must be >= 0 (0 = until EOS or the context is full), got " +
         std::to_string(o.generation.max_new_tokens));
  }
  if (o.generation.sampling.top_k < 0) {
    fail("--top-k must be >= 0 (0 = off), got " + std::to_string(o.generation.sampling.top_k));
  }
  for (size_t i = 0; i < words.size(); ++i) o.prompt += (i ? " " : "") + words[i];
  if (o.list_backends) return o;
  if (auto valid = rne::runner::validate(o.generation.sampling); !valid.ok()) {
    fail("invalid sampling option: " + valid.error().message);
  }
  if (auto valid = rne::runner::validate(o.generation.speculative); !valid.ok()) {
    fail("invalid speculative option (--speculative, --max-draft-tokens, --ngram-max, "
         "--ngram-min): " + valid.error().message);
  }
  require_utf8(o.prompt, "the prompt");
  require_utf8(o.system, "--system");
  require_utf8(o.generation.regex, "--regex");
  require_utf8(o.generation.grammar, "--grammar");
  if (json_syntax_given && o.generation.json_schema.empty()) {
    fail("--json-syntax applies to --json-schema; give a schema too");
  }
  if (o.generation.json_strict && o.generation.json_schema.empty()) {
    fail("--json-strict applies to --json-schema; give a schema too");
  }
  for (const auto& stop : o.generation.stop_strings) require_utf8(stop, "--stop");
  if (o.model.empty() || o.tokenizer.empty()) fail("--model and --tokenizer are required (see --help)");
  if (o.prompt.empty() && o.prompt_ids.empty()) fail("no prompt given (see --help)");
  // A chat-template prompt renders a whole conversation, which rne_llm does not keep across
  // processes: a loaded session continues with token ids or raw text appended as is.
  if (!o.load_session.empty() && ((o.prompt_ids.empty() && !o.raw) || o.interactive)) {
    fail("--load-session needs --prompt-ids or --raw (not a chat-template prompt or "
         "--interactive)");
  }
  if (!o.turn_ids.empty() && o.interactive) fail("--turn-ids and --interactive exclude each other");
  if (o.session_tokens_only && o.save_session.empty()) {
    fail("--session-tokens-only applies to --save-session; give a file too");
  }
#ifdef RNE_WITH_MEDIA
  if (!o.images.empty() && o.vision_encoder.empty()) {
    fail("--image needs --vision-encoder FILE.pte (the model's vision encoder program)");
  }
  if (!o.audios.empty() && o.audio_encoder.empty()) {
    fail("--audio needs --audio-encoder FILE.pte (the model's audio encoder program)");
  }
  if ((!o.images.empty() || !o.audios.empty()) && (o.raw || !o.prompt_ids.empty() || o.interactive)) {
    fail("--image and --audio work with a chat-template prompt only (not --raw, --prompt-ids "
         "or --interactive)");
  }
#else
  if (!o.images.empty() || !o.audios.empty() || !o.vision_encoder.empty() ||
      !o.audio_encoder.empty()) {
    fail("this rne_llm was built without image and audio input (cpp/media needs stb_image: run "
         "scripts/setup.sh and rebuild)");
  }
#endif
  return o;
}

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) ids.push_back(parse_number<int64_t>("--prompt-ids", item));
  if (ids.empty()) fail("--prompt-ids is empty");
  return ids;
}

std::string ids_json(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

// How the model file was checked, for the stats line: "sha256 hashed", "sha256 remembered" or
// "unchecked (no --sha256 and no export report)".
std::string g_integrity_note;

void print_stats(const Stats& s, bool with_load) {
  if (with_load) std::fprintf(stderr, "\n-- load %.0f ms, %s", s.load_ms, g_integrity_note.c_str());
  std::fprintf(stderr,
               "%s prompt %lld tokens, prefill %.1f tok/s | first token %.0f ms"
               " | %lld tokens, decode %.1f tok/s | stop: %s | cache %lld tokens\n",
               with_load ? " |" : "\n--", static_cast<long long>(s.prompt_tokens),
               s.prefill_tokens_per_s(),
               s.ttft_ms, static_cast<long long>(s.generated_tokens), s.decode_tokens_per_s(),
               rne::runner::stop_reason_name(s.stop_reason),
               static_cast<long long>(s.cache_tokens));
  if (s.drafted_tokens > 0) {
    // The first token comes from the prefill's logits; the rest from the decode forwards.
    std::fprintf(stderr,
                 "-- speculative: %lld drafted, %lld accepted (%.0f%%) | %lld forwards, %.2f "
                 "tokens per forward\n",
                 static_cast<long long>(s.drafted_tokens),
                 static_cast<long long>(s.accepted_tokens), 100.0 * s.acceptance_rate(),
                 static_cast<long long>(s.decode_forwards),
                 s.decode_forwards > 0
                     ? static_cast<double>(s.generated_tokens - 1) / s.decode_forwards
                     : 0.0);
  }
}

std::string stats_json(const Stats& s) {
  std::ostringstream o;
  o << "{\"load_ms\":" << s.load_ms << ",\"encode_ms\":" << s.encode_ms
    << ",\"media_encode_ms\":" << s.media_encode_ms
    << ",\"prefill_ms\":" << s.prefill_ms << ",\"ttft_ms\":" << s.ttft_ms
    << ",\"decode_ms\":" << s.decode_ms << ",\"sampling_ms\":" << s.sampling_ms
    << ",\"prompt_tokens\":" << s.prompt_tokens << ",\"generated_tokens\":" << s.generated_tokens
    << ",\"cache_tokens\":" << s.cache_tokens
    << ",\"prefill_tokens_per_s\":" << s.prefill_tokens_per_s()
    << ",\"decode_tokens_per_s\":" << s.decode_tokens_per_s()
    << ",\"drafted_tokens\":" << s.drafted_tokens << ",\"accepted_tokens\":" << s.accepted_tokens
    << ",\"decode_forwards\":" << s.decode_forwards
    << ",\"acceptance_rate\":" << s.acceptance_rate() << ",\"stop_reason\":\""
    << rne::runner::stop_reason_name(s.stop_reason) << "\"}";
  return o.str();
}

int run(int argc, char** argv);

}  // namespace

// Input sizes are bounded where they are read, but a bound can still ask for more memory than
// the machine has: that is an error message, not an abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    fail("out of memory (the model, tokenizer or prompt needs more than this machine has)");
  } catch (const std::exception& e) {
    fail(std::string("internal error: ") + e.what());
  }
}

namespace {

// The chat template the prompt is wrapped in; none with --raw or --prompt-ids.
std::optional<rne::chat::ChatTemplate> load_chat_template(const Options& o) {
  if (o.raw || !o.prompt_ids.empty()) return std::nullopt;
  const std::filesystem::path dir = std::filesystem::path(o.tokenizer).parent_path();
  auto t = o.tokenizer_config.empty()
               ? rne::chat::ChatTemplate::from_model_dir(dir.empty() ? "." : dir.string())
               : rne::chat::ChatTemplate::from_tokenizer_config(o.tokenizer_config);
  if (!t.ok()) {
    const auto& e = t.error();
    if (e.code == rne::chat::ErrorKind::kNotFound) {
      fail(e.message + "; pass --raw to send the prompt without a chat template");
    }
    fail(e.code == rne::chat::ErrorKind::kInvalidFile ? e.message : e.to_string());
  }
  return std::move(t).value();
}

// The model, its sha256 checked first when one is known (--sha256, else the export report);
// `integrity` says how it was checked.
std::unique_ptr<LlmRunner> load_runner(Options& o, std::string& integrity) {
  // Opened once and copied: the sha256 below and the program the runner loads are the same
  // bytes, and nothing done to the file later (replaced, rewritten, truncated) reaches the run.
  auto model = rne::runner::ModelFile::open(o.model, rne::runner::ModelFile::Hold::kPrivateCopy);
  if (!model.ok()) fail(model.error().message);
  integrity = "unchecked";
  g_integrity_note = "unchecked (no --sha256 and no export report beside the model)";
  if (o.sha256.empty()) {
    auto from_report = rne::host::sha256_from_export_report(o.model);
    if (!from_report.ok()) fail(from_report.error().message);
    o.sha256 = from_report->value_or("");
  }
  if (!o.sha256.empty()) {
    auto verified = rne::host::verify_model_file(**model, o.sha256);
    if (!verified.ok()) fail(verified.error().message);
    integrity = rne::host::integrity_check_name(*verified);
    g_integrity_note = "sha256 " + integrity;
  }
  auto loaded = LlmRunner::load(std::move(model).value(), o.tokenizer);
  if (!loaded.ok()) fail(loaded.error().message);
  return std::move(loaded).value();
}

std::string session_fields(const rne::runner::SessionInfo& info) {
  std::ostringstream out;
  out << "{\"file_bytes\":" << info.file_bytes << ",\"tokens\":" << info.tokens
      << ",\"restored\":\"" << rne::runner::session_restore_name(info.restore)
      << "\",\"ms\":" << info.ms << "}";
  return out.str();
}

rne::json::Value chat_message(const char* role, const std::string& content) {
  return rne::json::Value(rne::json::Object{{"role", rne::json::Value(std::string(role))},
                                            {"content", rne::json::Value(content)}});
}

// The conversation so far, rendered whole as apply_chat_template would, as token ids.
rne::chat::Result<std::vector<int64_t>> render_ids(const rne::chat::ChatTemplate& chat,
                                                   const LlmRunner& runner,
                                                   const rne::json::Array& conversation) {
  rne::chat::RenderOptions options;
  options.add_generation_prompt = true;
  // Message content is encoded as plain text (a user cannot write "<|im_end|>" and end a
  // turn); the template's own text is parsed for special tokens.
  auto rendered = chat.render_prompt(rne::json::Value(conversation), options);
  if (!rendered.ok()) return rendered.error();
  std::vector<rne::tokenizer::TextPart> parts;
  for (const auto& part : rendered->parts) {
    parts.push_back({part.text, part.plain ? rne::tokenizer::SpecialTokens::kAsText
                                           : rne::tokenizer::SpecialTokens::kParse});
  }
  const auto ids = runner.tokenizer().encode_parts(parts, /*add_special_tokens=*/false);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

// The first turn's prompt: its ids, and where media soft tokens stand in it.
struct Prompt {
  std::vector<int64_t> ids;
  std::vector<rne::runner::MediaSpan> spans;
  double media_encode_ms = 0;  // images and audio through their encoders
};

#ifdef RNE_WITH_MEDIA
// The user message: the images, the clips, then the text. The template writes a placeholder
// per media item; each becomes that item's tokens, in order.
Prompt media_prompt(const Options& o, const rne::chat::ChatTemplate& chat, LlmRunner& runner,
                    rne::json::Array& conversation) {
  std::unique_ptr<rne::runner::VisionEncoder> vision;
  std::unique_ptr<rne::runner::AudioEncoder> audio;
  if (!o.vision_encoder.empty()) {
    auto loaded_encoder = rne::runner::VisionEncoder::load(o.vision_encoder);
    if (!loaded_encoder.ok()) fail(loaded_encoder.error().message);
    vision = std::move(loaded_encoder).value();
  }
  if (!o.audio_encoder.empty()) {
    auto loaded_encoder = rne::runner::AudioEncoder::load(o.audio_encoder);
    if (!loaded_encoder.ok()) fail(loaded_encoder.error().message);
    audio = std::move(loaded_encoder).value();
  }
  rne::media::MediaEmbedder embedder(std::move(vision), std::move(audio));
  struct Item {
    const char* type;
    std::string path;
  };
  std::vector<Item> items;
  for (const auto& path : o.images) items.push_back({"image", path});
  for (const auto& path : o.audios) items.push_back({"audio", path});
  rne::json::Array content;
  for (const Item& item : items) {
    content.push_back(rne::json::Value(
        rne::json::Object{{"type", rne::json::Value(std::string(item.type))}}));
  }
  content.push_back(rne::json::Value(
      rne::json::Object{{"type", rne::json::Value(std::string("text"))},
                        {"text", rne::json::Value(o.prompt)}}));
  if (!o.system.empty()) conversation.push_back(chat_message("system", o.system));
  conversation.push_back(rne::json::Value(rne::json::Object{
      {"role", rne::json::Value(std::string("user"))}, {"content", rne::json::Value(content)}}));
  rne::chat::RenderOptions options;
  options.add_generation_prompt = true;
  auto rendered = chat.render_prompt(rne::json::Value(conversation), options);
  if (!rendered.ok()) fail("the chat template failed: " + rendered.error().to_string());
  Prompt prompt;
  size_t next = 0;
  auto append = [&](const std::string& text, bool plain) {
    const auto ids = runner.tokenizer().encode_parts(
        {{text, plain ? rne::tokenizer::SpecialTokens::kAsText
                      : rne::tokenizer::SpecialTokens::kParse}},
        /*add_special_tokens=*/false);
    prompt.ids.insert(prompt.ids.end(), ids.begin(), ids.end());
  };
  auto next_placeholder = [](const std::string& text, size_t from, std::string* found) {
    size_t best = std::string::npos;
    for (std::string_view placeholder : {rne::chat::kGemma4MediaPlaceholdersImage,
                                         rne::chat::kGemma4MediaPlaceholdersAudio}) {
      const size_t at = text.find(placeholder, from);
      if (at < best) {
        best = at;
        *found = std::string(placeholder);
      }
    }
    return best;
  };
  for (const auto& part : rendered->parts) {
    size_t from = 0;
    std::string placeholder;
    for (size_t at; !part.plain &&
                    (at = next_placeholder(part.text, from, &placeholder)) != std::string::npos;
         from = at + placeholder.size()) {
      if (at > from) append(part.text.substr(from, at - from), false);
      const std::string kind =
          placeholder == rne::chat::kGemma4MediaPlaceholdersImage ? "image" : "audio";
      if (next == items.size() || kind != items[next].type) {
        fail("the chat template wrote a " + kind + " placeholder where the message has " +
             (next == items.size() ? std::string("no more media") : items[next].type));
      }
      auto media = kind == "image" ? embedder.image(items[next].path)
                                   : embedder.audio_file(items[next].path);
      if (!media.ok()) fail(media.error().message);
      prompt.media_encode_ms += media->encode_ms;
      ++next;
      media->span.offset += static_cast<int64_t>(prompt.ids.size());
      prompt.ids.insert(prompt.ids.end(), media->tokens.begin(), media->tokens.end());
      prompt.spans.push_back(media->span);
    }
    if (from < part.text.size()) append(part.text.substr(from), part.plain);
  }
  if (next != items.size()) {
    fail("the chat template wrote " + std::to_string(next) + " media placeholders for " +
         std::to_string(items.size()) + " --image/--audio files: it does not take them");
  }
  return prompt;
}
#endif

Prompt first_prompt(const Options& o, const std::optional<rne::chat::ChatTemplate>& chat,
                    LlmRunner& runner, rne::json::Array& conversation) {
#ifdef RNE_WITH_MEDIA
  if (!o.images.empty() || !o.audios.empty()) return media_prompt(o, *chat, runner, conversation);
#endif
  Prompt prompt;
  if (!o.prompt_ids.empty()) {
    prompt.ids = parse_ids(o.prompt_ids);
  } else if (o.raw) {
    prompt.ids = runner.encode(o.prompt, /*add_special_tokens=*/true);
  } else {
    if (!o.system.empty()) conversation.push_back(chat_message("system", o.system));
    conversation.push_back(chat_message("user", o.prompt));
    auto ids = render_ids(*chat, runner, conversation);
    if (!ids.ok()) fail("the chat template failed: " + ids.error().to_string());
    prompt.ids = std::move(ids).value();
  }
  return prompt;
}

// Per turn: its answer's ids and stats.
struct Turn {
  std::vector<int64_t> tokens;
  Stats stats;
};

void print_json(const std::string& text, const std::vector<int64_t>& prompt_ids,
                const LlmRunner& runner, const std::optional<rne::chat::ChatTemplate>& chat,
                const std::string& integrity, const std::string& session_json,
                const std::vector<Turn>& turns) {
  std::string text_json;
  rne::json::write_string(text, text_json);
  std::string template_json = "null";
  if (chat) {
    template_json.clear();
    rne::json::write_string(chat->origin(), template_json);
  }
  std::cout << "{\"text\":" << text_json << ",\"prompt_ids\":" << ids_json(prompt_ids)
            << ",\"tokens\":" << ids_json(runner.last_tokens()) << ",\"max_chunk\":"
            << runner.contract().max_chunk << ",\"max_context\":" << runner.contract().max_context
            << ",\"chat_template\":" << template_json
            << ",\"integrity\":\"" << integrity << "\",\"stats\":" << stats_json(turns[0].stats)
            << session_json << ",\"turns\":[";
  for (size_t i = 0; i < turns.size(); ++i) {
    std::cout << (i ? "," : "") << "{\"tokens\":" << ids_json(turns[i].tokens)
              << ",\"stats\":" << stats_json(turns[i].stats) << "}";
  }
  std::cout << "]"
            << "}\n";
}

// --interactive: later turns read from stdin. Each re-renders the whole conversation (a
// template may rewrite earlier turns, e.g. strip their thinking); the runner prefills only what
// its KV cache does not already hold.
void chat_on_stdin(const Options& o, const rne::chat::ChatTemplate& chat, LlmRunner& runner,
                   rne::json::Array& conversation, std::string& text,
                   const std::function<void(std::string_view)>& on_text) {
  conversation.push_back(chat_message("assistant", text));
  std::string line;
  while (std::cerr << "\n> " && std::getline(std::cin, line)) {
    if (line.empty()) continue;
    if (auto valid = rne::runner::check_utf8(line, "this message"); !valid.ok()) {
      std::cerr << "rne_llm: " << valid.error().message << "\n";
      continue;
    }
    conversation.push_back(chat_message("user", line));
    auto ids = render_ids(chat, runner, conversation);
    if (!ids.ok()) {
      std::cerr << "rne_llm: the chat template failed: " << ids.error().to_string() << "\n";
      conversation.pop_back();
      continue;
    }
    const size_t answer_start = text.size();
    auto turn = runner.generate_prompt(*ids, o.generation, on_text);
    if (!turn.ok()) {
      std::cerr << "rne_llm: " << turn.error().message << "\n";
      conversation.pop_back();
      continue;
    }
    conversation.push_back(chat_message("assistant", text.substr(answer_start)));
    print_stats(*turn, /*with_load=*/false);
  }
}

int run(int argc, char** argv) {
  executorch::runtime::register_pal(
      executorch::runtime::PalImpl::create(emit_runtime_log, __FILE__));
  Options o = parse_args(argc, argv);
  if (o.list_backends) {
    for (const auto& name : rne::runner::registered_backends()) std::cout << name << "\n";
    return 0;
  }

  const std::optional<rne::chat::ChatTemplate> chat = load_chat_template(o);
  std::string integrity;
  const std::unique_ptr<LlmRunner> loaded = load_runner(o, integrity);
  LlmRunner& runner = *loaded;
  g_runner.store(&runner);
  std::string session_json;  // ,"session_loaded":{...},"session_saved":{...} for --json
  if (!o.load_session.empty()) {
    auto loaded_session = rne::runner::SessionFile::load(runner.generator(), o.load_session);
    if (!loaded_session.ok()) fail(loaded_session.error().message);
    session_json += ",\"session_loaded\":" + session_fields(*loaded_session);
    if (!o.json) {
      std::fprintf(stderr, "-- session: %lld tokens from %s (%s, %.0f ms)\n",
                   static_cast<long long>(loaded_session->tokens), o.load_session.c_str(),
                   rne::runner::session_restore_name(loaded_session->restore), loaded_session->ms);
    }
  }

  std::signal(SIGINT, on_sigint);

  rne::json::Array conversation;  // the chat so far, for --interactive's later turns
  const Prompt prompt = first_prompt(o, chat, runner, conversation);

  std::string text;
  auto on_text = [&](std::string_view piece) {
    text.append(piece);
    if (!o.json) {
      std::cout << piece;
      std::cout.flush();
    }
  };
  auto stats = prompt.spans.empty()
                   ? runner.generate(prompt.ids, o.generation, on_text)
                   : runner.generate_prompt(prompt.ids, o.generation, on_text, prompt.spans);
  if (!stats.ok()) fail(stats.error().message);
  stats->media_encode_ms = prompt.media_encode_ms;
  stats->ttft_ms += prompt.media_encode_ms;

  // Per turn: its answer's ids, stats and last logits (--logits-out).
  std::vector<Turn> turns{{runner.last_tokens(), *stats}};
  std::vector<float> logits_rows;
  auto keep_logits = [&]() {
    const auto logits = runner.generator().last_logits();
    logits_rows.insert(logits_rows.end(), logits.data, logits.data + logits.size);
  };
  keep_logits();
  for (const auto& ids : o.turn_ids) {
    auto turn = runner.generate(parse_ids(ids), o.generation, on_text);
    if (!turn.ok()) fail(turn.error().message);
    turns.push_back({runner.last_tokens(), *turn});
    keep_logits();
  }
  if (!o.logits_out.empty()) {
    std::FILE* out = std::fopen(o.logits_out.c_str(), "wb");
    if (out == nullptr ||
        std::fwrite(logits_rows.data(), sizeof(float), logits_rows.size(), out) !=
            logits_rows.size() ||
        std::fclose(out) != 0) {
      fail("cannot write --logits-out " + o.logits_out);
    }
  }
  if (!o.save_session.empty()) {
    auto saved = rne::runner::SessionFile::save(runner.generator(), o.save_session,
                                                o.session_tokens_only);
    if (!saved.ok()) fail(saved.error().message);
    session_json += ",\"session_saved\":" + session_fields(*saved);
    if (!o.json) {
      std::fprintf(stderr, "-- session: %lld tokens saved to %s, %llu bytes (%.0f ms)\n",
                   static_cast<long long>(saved->tokens), o.save_session.c_str(),
                   static_cast<unsigned long long>(saved->file_bytes), saved->ms);
    }
  }

  if (o.json) {
    print_json(text, prompt.ids, runner, chat, integrity, session_json, turns);
    return 0;
  }
  print_stats(turns[0].stats, /*with_load=*/true);
  for (size_t i = 1; i < turns.size(); ++i) print_stats(turns[i].stats, /*with_load=*/false);

  if (o.interactive && chat) chat_on_stdin(o, *chat, runner, conversation, text, on_text);
  return 0;
}

}  // namespace

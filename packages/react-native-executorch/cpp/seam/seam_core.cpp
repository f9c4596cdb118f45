#include "seam_core.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <new>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>

#include "backend_catalog.generated.h"
#include "rne/runner/backends.h"
#include "rne/runner/sampler_ranges.generated.h"
#include "rne/runner/speculative_options.h"
#include "rne/tokenizer/tokenizer.h"
#ifdef RNE_WITH_MEDIA
#include "rne/media/media_embedder.h"
#endif

namespace rne::seam {
namespace {

// generate()'s options: one row per field of NativeGenerationConfig (src/native/seam.ts), with
// the GenerationConfig field it sets; the JS type read (number, string, array of strings, or
// for an enum one of its names, boolean for a bool) follows from the field's C++ type. Adding a sampler option: its
// SamplerConfig field and range check (runner::validate), a kOptional row here (an app whose
// TypeScript omits it keeps the field's default) and its TypeScript field (SamplingOptions).
// rne_llm takes every row as a flag too (generationOptionsAsText: topP is --top-p).
using runner::GenerationConfig;
using runner::SamplerConfig;
using Speculative = runner::SpeculativeConfig;

enum class Presence { kRequired, kOptional };

// The field a row's member-pointer path (GenerationConfig::sampling, then SamplerConfig::top_k)
// leads to.
template <typename Object, typename Member, typename... Rest>
auto& fieldAt(Object& object, Member member, Rest... rest) {
  if constexpr (sizeof...(rest) == 0) {
    return object.*member;
  } else {
    return fieldAt(object.*member, rest...);
  }
}

template <auto... Path>
Result<void> readOption(const ObjectReader& object, const char* name, Presence presence,
                        GenerationConfig& config) {
  if (presence == Presence::kOptional && !object.has(name)) return {};
  auto& field = fieldAt(config, Path...);
  using Field = std::remove_reference_t<decltype(field)>;
  const auto wrong = [name](const char* type) {
    return invalidArgument(std::string("config.") + name + " must be " + type);
  };
  if constexpr (std::is_same_v<Field, bool>) {
    auto value = object.boolean(name);
    if (!value) return wrong("a boolean");
    field = *value;
  } else if constexpr (std::is_arithmetic_v<Field>) {
    auto value = object.number(name);
    if (!value) return wrong("a number");
    // A fraction or an out-of-range count would be truncated or wrap (undefined for NaN).
    if constexpr (std::is_same_v<Field, int32_t>) {
      if (!(*value >= INT32_MIN && *value <= INT32_MAX) || *value != std::trunc(*value)) {
        return wrong("a 32-bit integer");
      }
    }
    field = static_cast<Field>(*value);
  } else if constexpr (std::is_same_v<Field, std::string>) {
    auto value = object.string(name);
    if (!value) return wrong("a string");
    field = std::move(*value);
  } else if constexpr (std::is_same_v<Field, grammar::JsonSyntax>) {
    auto value = object.string(name);
    if (value && *value == "json") {
      field = grammar::JsonSyntax::kJson;
    } else if (value && *value == "gemma4") {
      field = grammar::JsonSyntax::kGemma4;
    } else {
      return wrong("\"json\" or \"gemma4\"");
    }
  } else if constexpr (std::is_same_v<Field, runner::Drafter>) {
    auto value = object.string(name);
    auto drafter = value ? runner::drafter_named(*value) : std::nullopt;
    if (!drafter) return wrong("\"promptLookup\" or \"assistant\"");
    field = *drafter;
  } else {
    static_assert(std::is_same_v<Field, std::vector<std::string>>, "no JS type for this field");
    auto value = object.strings(name);
    if (!value) return wrong("an array of strings");
    field = std::move(*value);
  }
  return {};
}

// The row's field read from a CLI flag's text (GenerationOptionText).
template <auto... Path>
Result<void> parseOptionText(const std::string& flag, const std::string& text,
                             GenerationConfig& config) {
  auto& field = fieldAt(config, Path...);
  using Field = std::remove_reference_t<decltype(field)>;
  if constexpr (std::is_same_v<Field, bool>) {
    field = true;
  } else if constexpr (std::is_arithmetic_v<Field>) {
    std::istringstream in(text);
    Field value{};
    // An istream reads "-1" into an unsigned type as a huge number: a sign is refused there.
    const bool sign_in_unsigned = std::is_unsigned_v<Field> && text.find('-') != std::string::npos;
    if (sign_in_unsigned || !(in >> value) || !in.eof()) {
      return invalidArgument(flag + " expects a number" +
                             (std::is_integral_v<Field> ? " (an integer in range)" : "") +
                             ", got '" + text + "'");
    }
    field = value;
  } else if constexpr (std::is_same_v<Field, std::string>) {
    field = text;
  } else if constexpr (std::is_same_v<Field, grammar::JsonSyntax>) {
    if (text == "json") {
      field = grammar::JsonSyntax::kJson;
    } else if (text == "gemma4") {
      field = grammar::JsonSyntax::kGemma4;
    } else {
      return invalidArgument(flag + ": unknown syntax '" + text + "' (expected json or gemma4)");
    }
  } else if constexpr (std::is_same_v<Field, runner::Drafter>) {
    std::string names;
    for (runner::Drafter drafter : {runner::Drafter::kPromptLookup, runner::Drafter::kAssistant}) {
      const std::string name = kebabCase(runner::drafter_name(drafter));
      if (text == name) {
        field = drafter;
        return {};
      }
      names += (names.empty() ? "" : " or ") + name;
    }
    return invalidArgument(flag + ": unknown drafter '" + text + "' (expected " + names + ")");
  } else {
    static_assert(std::is_same_v<Field, std::vector<std::string>>, "no text form for this field");
    field.push_back(text);
  }
  return {};
}

struct GenerationOption {
  const char* name;
  Presence presence;
  Result<void> (*read)(const ObjectReader&, const char*, Presence, GenerationConfig&);
  Result<void> (*parse_text)(const std::string&, const std::string&, GenerationConfig&);
  bool is_switch;
};

template <auto... Path>
constexpr GenerationOption option(const char* name, Presence presence = Presence::kRequired) {
  using Field = std::remove_reference_t<decltype(fieldAt(std::declval<GenerationConfig&>(), Path...))>;
  return {name, presence, &readOption<Path...>, &parseOptionText<Path...>,
          std::is_same_v<Field, bool>};
}

constexpr auto kSpeculative = &GenerationConfig::speculative;

constexpr GenerationOption kGenerationOptions[] = {
    option<&GenerationConfig::max_new_tokens>("maxNewTokens"),
// Each ranged sampler option of cpp/runner/sampler_options.yaml (generated), then the seed.
#define RNE_SAMPLER_ROW(field, name) option<&GenerationConfig::sampling, &SamplerConfig::field>(name),
    RNE_SAMPLER_OPTIONS(RNE_SAMPLER_ROW)
#undef RNE_SAMPLER_ROW
    option<&GenerationConfig::sampling, &SamplerConfig::seed>("seed"),
    option<&GenerationConfig::stop_strings>("stopStrings"),
    // A JSON Schema's text; the runner constrains the answer to it.
    option<&GenerationConfig::json_schema>("responseFormat", Presence::kOptional),
    // A regex the whole answer matches (responseFormat: { regex } in TypeScript).
    option<&GenerationConfig::regex>("responseRegex", Presence::kOptional),
    // A GBNF grammar the whole answer is a sentence of (responseFormat: { grammar } in TypeScript).
    option<&GenerationConfig::grammar>("responseGrammar", Presence::kOptional),
    // The syntax responseFormat's documents are written in (Gemma 4's tool-call arguments).
    option<&GenerationConfig::json_syntax>("responseSyntax", Presence::kOptional),
    // responseFormat's unknown keywords and formats refused instead of ignored.
    option<&GenerationConfig::json_strict>("responseStrict", Presence::kOptional),
    // Special tokens the streamed text keeps (a chat format's markers its parsers read).
    option<&GenerationConfig::keep_special_tokens>("keepSpecialTokens", Presence::kOptional),
    // Speculative decoding (speculative in TypeScript): off without a drafter; the rest tunes it.
    option<kSpeculative, &Speculative::drafter>("drafter", Presence::kOptional),
    option<kSpeculative, &Speculative::max_draft_tokens>("maxDraftTokens", Presence::kOptional),
    option<kSpeculative, &Speculative::ngram_max>("ngramMax", Presence::kOptional),
    option<kSpeculative, &Speculative::ngram_min>("ngramMin", Presence::kOptional),
};

// Runs `body`, turning an exception from below the runner's no-throw API (running out of memory
// while encoding a huge prompt, or inside the runtime) into an Error: it must never unwind into
// the worker thread or the JS engine, which would abort the app.
template <typename Body>
auto guarded(const char* what, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Error{runner::ErrorCode::kExecutionFailed,
                 std::string("out of memory while ") + what +
                     "; use a shorter prompt or a smaller model, or close other apps"};
  } catch (const std::exception& e) {
    return Error{runner::ErrorCode::kExecutionFailed,
                 std::string("failed while ") + what + ": " + e.what()};
  }
}

#ifdef RNE_WITH_MEDIA
// The encoder at `path` (none where it is empty), its rows as wide as the model's embeddings
// (`embeds_width`), or the error naming it as another model's.
template <typename Encoder>
Result<std::unique_ptr<Encoder>> loadEncoder(const std::string& path, int64_t embeds_width) {
  if (path.empty()) return std::unique_ptr<Encoder>();
  auto loaded = Encoder::load(path);
  if (!loaded.ok()) return loaded.error();
  const int64_t width = (*loaded)->contract().text_hidden;
  if (width != embeds_width) {
    return invalidArgument(path + " gives rows of " + std::to_string(width) +
                           " values but the model takes " + std::to_string(embeds_width) +
                           ": it is another model's encoder");
  }
  return std::move(loaded).value();
}

// The encoders `options` name, checked against the model's embedding width; null when none.
Result<std::unique_ptr<media::MediaEmbedder>> loadEncoders(const LoadOptions& options,
                                                           int64_t embeds_width) {
  if (options.vision_encoder_path.empty() && options.audio_encoder_path.empty()) {
    return std::unique_ptr<media::MediaEmbedder>();
  }
  if (embeds_width == 0) {
    return invalidArgument(options.model_path + " takes text only: load it without encoders, "
                           "or use a variant exported with them");
  }
  auto vision = loadEncoder<runner::VisionEncoder>(options.vision_encoder_path, embeds_width);
  if (!vision.ok()) return vision.error();
  auto audio = loadEncoder<runner::AudioEncoder>(options.audio_encoder_path, embeds_width);
  if (!audio.ok()) return audio.error();
  return std::make_unique<media::MediaEmbedder>(std::move(vision).value(),
                                                std::move(audio).value());
}
#endif

}  // namespace

std::vector<int64_t> encodePrompt(const tokenizer::Tokenizer& tokenizer, const Prompt& prompt) {
  std::vector<tokenizer::TextPart> parts;
  parts.reserve(prompt.size());
  for (const PromptPart& part : prompt) {
    parts.push_back({part.text, part.plain ? tokenizer::SpecialTokens::kAsText
                                           : tokenizer::SpecialTokens::kParse});
  }
  const std::vector<tokenizer::TokenId> ids = tokenizer.encode_parts(parts, false);
  return {ids.begin(), ids.end()};
}

Error invalidArgument(std::string message) {
  return Error{runner::ErrorCode::kInvalidArgument, std::move(message)};
}

Result<LoadOptions> parseLoadOptions(const ObjectReader& options) {
  LoadOptions parsed;
  for (auto [name, field] : {std::pair{"modelPath", &parsed.model_path},
                             std::pair{"tokenizerPath", &parsed.tokenizer_path},
                             std::pair{"backend", &parsed.backend}}) {
    auto value = options.string(name);
    if (!value) return invalidArgument(std::string(name) + " must be a string");
    *field = std::move(*value);
  }
  for (auto [name, field] : {std::pair{"visionEncoderPath", &parsed.vision_encoder_path},
                             std::pair{"audioEncoderPath", &parsed.audio_encoder_path}}) {
    if (!options.has(name)) continue;
    auto value = options.string(name);
    if (!value) return invalidArgument(std::string(name) + " must be a string");
    *field = std::move(*value);
  }
  auto memory = parseMemoryNeed(options);
  if (!memory.ok()) return memory.error();
  parsed.memory = std::move(memory).value();
  return parsed;
}

Result<MemoryNeed> parseMemoryNeed(const ObjectReader& options) {
  MemoryNeed need;
  // The registry's measured peaks (peakMemoryBytes) of this variant and of the smallest other
  // variant of the model the device can run (smallerVariant, smallerVariantPeakBytes).
  for (auto [name, field] :
       {std::pair{"peakMemoryBytes", &need.peak_bytes},
        std::pair{"smallerVariantPeakBytes", &need.smaller_variant_peak_bytes},
        std::pair{"availableMemoryBytes", static_cast<uint64_t*>(nullptr)}}) {
    if (!options.has(name)) continue;
    auto value = options.number(name);
    if (!value || !(*value >= 0) || *value > 9.0e15) {
      return invalidArgument(std::string(name) + " must be a byte count");
    }
    if (field == nullptr) {
      need.available_bytes = static_cast<uint64_t>(*value);
    } else {
      *field = static_cast<uint64_t>(*value);
    }
  }
  if (options.has("smallerVariant")) {
    auto value = options.string("smallerVariant");
    if (!value) return invalidArgument("smallerVariant must be a string");
    need.smaller_variant = std::move(*value);
  }
  return need;
}

Result<void> checkMemoryNeed(const MemoryNeed& need) {
  return checkMemory(need, need.available_bytes ? need.available_bytes : availableMemoryBytes());
}

Result<runner::GenerationConfig> parseGenerationConfig(const ObjectReader& object) {
  GenerationConfig config;
  for (const GenerationOption& option : kGenerationOptions) {
    if (auto read = option.read(object, option.name, option.presence, config); !read.ok()) {
      return read.error();
    }
  }
  if (auto valid = runner::validate(config.sampling); !valid.ok()) return valid.error();
  if (auto valid = runner::validate(config.speculative); !valid.ok()) return valid.error();
  return config;
}

std::vector<GenerationOptionText> generationOptionsAsText() {
  std::vector<GenerationOptionText> rows;
  for (const GenerationOption& option : kGenerationOptions) {
    rows.push_back({option.name, !option.is_switch, option.parse_text});
  }
  return rows;
}

std::string kebabCase(std::string_view camel) {
  std::string out;
  for (char c : camel) {
    if (c >= 'A' && c <= 'Z') {
      out += '-';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

StatsFields statsFields(const runner::Stats& stats) {
  return StatsFields{
      {{"promptTokens", static_cast<double>(stats.prompt_tokens)},
       {"reusedTokens", static_cast<double>(stats.reused_tokens)},
       {"generatedTokens", static_cast<double>(stats.generated_tokens)},
       {"cacheTokens", static_cast<double>(stats.cache_tokens)},
       {"timeToFirstTokenMs", stats.ttft_ms},
       {"mediaEncodeMs", stats.media_encode_ms},
       {"prefillMs", stats.prefill_ms},
       {"decodeMs", stats.decode_ms},
       {"prefillTokensPerSecond", stats.prefill_tokens_per_s()},
       {"tokensPerSecond", stats.decode_tokens_per_s()},
       {"draftedTokens", static_cast<double>(stats.drafted_tokens)},
       {"acceptedTokens", static_cast<double>(stats.accepted_tokens)},
       {"decodeForwards", static_cast<double>(stats.decode_forwards)},
       {"acceptanceRate", stats.acceptance_rate()}},
      runner::stop_reason_name(stats.stop_reason)};
}

// One loaded model. `runner` is used on the worker thread only; `tokenizer` and `max_context`
// are immutable and read from any thread.
struct SeamCore::Model {
  std::unique_ptr<runner::LlmRunner> runner;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  int64_t max_context = 0;
#ifdef RNE_WITH_MEDIA
  // Images and audio in prompts, when loaded with their encoders. Encoding on the worker only;
  // counting from any thread.
  std::shared_ptr<media::MediaEmbedder> media;  // shared by the model's sessions
#endif
  std::atomic<bool> running{false};
  // Set by interrupt(), cleared by generate() on the JS thread: an interrupt that arrives
  // before the queued generation starts (when the runner would clear its own flag) still stops it.
  std::atomic<bool> stop_requested{false};
  std::mutex stats_mutex;
  std::optional<runner::Stats> last_stats;  // guarded by stats_mutex
};

SeamCore::SeamCore(PlatformInfo platform)
    : platform_(std::move(platform)), worker_(std::make_unique<WorkQueue>()) {}

SeamCore::~SeamCore() {
  {
    // The host is going away: stop generations so the worker drains quickly.
    std::lock_guard<std::mutex> lock(models_mutex_);
    for (auto& [handle, model] : models_) {
      model->stop_requested.store(true);
      model->runner->interrupt();
    }
  }
  worker_.reset();
}

std::vector<std::string> SeamCore::availableBackends() const {
  std::vector<std::string> names;
  for (const BackendInfo& backend : kBackendCatalog) {
    if (!runner::has_backend(backend.runtime)) continue;
    // A backend that never runs on this platform's simulator (MLX) is not offered there.
    if (platform_.is_simulator &&
        simulator_rule(backend, platform_.os) == SimulatorRule::kNever) {
      continue;
    }
    names.emplace_back(backend.name);
  }
  return names;
}

Result<void> SeamCore::loadLLM(LoadOptions options, LoadDone done) {
  auto known = std::find_if(kBackendCatalog.begin(), kBackendCatalog.end(),
                            [&](const BackendInfo& entry) { return entry.name == options.backend; });
  if (known == kBackendCatalog.end()) {
    return invalidArgument("Unknown backend \"" + options.backend + "\"");
  }
  if (!runner::has_backend(known->runtime)) {
    return invalidArgument("This app's native binary was built without the " + options.backend +
                           " backend (" + known->runtime + ")");
  }
#ifndef RNE_WITH_MEDIA
  if (!options.vision_encoder_path.empty() || !options.audio_encoder_path.empty()) {
    return invalidArgument("This native binary was built without image and audio input "
                           "(cpp/media); load the model without its encoders");
  }
#endif
  // Refused before anything is mapped: a load the system cannot hold gets the app killed.
  if (auto fits = checkMemoryNeed(options.memory); !fits.ok()) return fits.error();
  worker_->post([this, options = std::move(options), done = std::move(done)] {
    auto loaded = guarded("loading the model", [&] {
      return runner::LlmRunner::load(options.model_path, options.tokenizer_path);
    });
    if (!loaded.ok()) return done(loaded.error());
    auto model = std::make_shared<Model>();
#ifdef RNE_WITH_MEDIA
    auto media = guarded("loading the encoders", [&] {
      return loadEncoders(options, (*loaded)->contract().embeds_width);
    });
    if (!media.ok()) return done(media.error());
    model->media = std::move(media).value();
#endif
    model->runner = std::move(loaded).value();
    model->tokenizer = std::make_shared<const tokenizer::Tokenizer>(model->runner->tokenizer());
    model->max_context = model->runner->contract().max_context;
    done(add(std::move(model)));
  });
  return {};
}

Handle SeamCore::add(std::shared_ptr<Model> model) {
  std::lock_guard<std::mutex> lock(models_mutex_);
  const Handle handle = next_handle_++;
  models_.emplace(handle, std::move(model));
  return handle;
}

Result<std::shared_ptr<SeamCore::Model>> SeamCore::claim(Handle handle, const char* busy) {
  auto found = find(handle);
  if (!found.ok()) return found.error();
  if ((*found)->running.exchange(true)) return Error{runner::ErrorCode::kBusy, busy};
  return found;
}

Result<std::shared_ptr<SeamCore::Model>> SeamCore::find(Handle handle) {
  std::lock_guard<std::mutex> lock(models_mutex_);
  auto found = models_.find(handle);
  if (found == models_.end()) {
    return invalidArgument("Model handle " + std::to_string(handle) + " is not loaded (released?)");
  }
  return found->second;
}

Result<void> SeamCore::generate(Handle handle, Prompt prompt,
                                runner::GenerationConfig config, OnPiece on_piece,
                                GenerateDone done) {
  auto claimed = claim(handle,
                       "generate() is already running on this model; await it or call "
                       "interrupt() first");
  if (!claimed.ok()) return claimed.error();
  std::shared_ptr<Model> model = *claimed;
  model->stop_requested.store(false);
  worker_->post([this, model, prompt = std::move(prompt), config = std::move(config),
                 on_piece = std::move(on_piece), done = std::move(done)] {
    runGeneration(*model, prompt, config, on_piece, done);
  });
  return {};
}

void SeamCore::runGeneration(Model& model, const Prompt& prompt,
                             const runner::GenerationConfig& config, const OnPiece& on_piece,
                             const GenerateDone& done) {
  auto result = guarded("generating", [&]() -> Result<runner::Stats> {
    std::vector<runner::MediaSpan> media;
    double media_ms = 0;
    auto tokens = encode(model, prompt, &media, &media_ms);
    if (!tokens.ok()) return tokens.error();
    auto stats = model.runner->generate_prompt(*tokens, config, [&](std::string_view text) {
      if (model.stop_requested.load()) model.runner->interrupt();
      on_piece(std::string(text), static_cast<int64_t>(model.runner->last_tokens().size()));
    }, media);
    if (stats.ok()) {
      stats->media_encode_ms = media_ms;
      stats->ttft_ms += media_ms;
    }
    return stats;
  });
  if (result.ok()) {
    std::lock_guard<std::mutex> lock(model.stats_mutex);
    model.last_stats = result.value();
  } else {
    // A failed runtime call may leave the cache half-written: start the next call from scratch.
    model.runner->reset();
  }
  model.running.store(false);
  done(std::move(result));
}

Result<void> SeamCore::interrupt(Handle handle) {
  auto model = find(handle);
  if (!model.ok()) return model.error();
  (*model)->stop_requested.store(true);
  (*model)->runner->interrupt();
  return {};
}

Result<void> SeamCore::reset(Handle handle) {
  auto found = find(handle);
  if (!found.ok()) return found.error();
  std::shared_ptr<Model> model = *found;
  if (model->running.load()) {
    return Error{runner::ErrorCode::kBusy, "reset() while generating; interrupt() first"};
  }
  // Queued behind any work on this model, on the thread that owns the runner.
  worker_->post([model] { model->runner->reset(); });
  return {};
}

Result<std::optional<runner::Stats>> SeamCore::stats(Handle handle) {
  auto model = find(handle);
  if (!model.ok()) return model.error();
  std::lock_guard<std::mutex> lock((*model)->stats_mutex);
  return (*model)->last_stats;
}

Result<int64_t> SeamCore::countTokens(Handle handle, const Prompt& prompt) {
  auto model = find(handle);
  if (!model.ok()) return model.error();
  return guarded("counting tokens", [&]() -> Result<int64_t> {
    auto tokens = encode(**model, prompt, nullptr);
    if (!tokens.ok()) return tokens.error();
    return static_cast<int64_t>(tokens->size());
  });
}

Result<std::vector<int64_t>> SeamCore::encode(Model& model, const Prompt& prompt,
                                               std::vector<runner::MediaSpan>* spans,
                                               double* media_ms) {
  std::vector<int64_t> ids;
  Prompt text;  // the text parts since the last media part, encoded as one text
  auto flush = [&] {
    const auto encoded = encodePrompt(*model.tokenizer, text);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    text.clear();
  };
  for (const PromptPart& part : prompt) {
    if (part.media.empty()) {
      text.push_back(part);
      continue;
    }
    flush();
#ifdef RNE_WITH_MEDIA
    if (model.media == nullptr) {
      return invalidArgument("This model was loaded without its encoders, so it cannot take "
                             "images or audio: load it with visionEncoderPath/audioEncoderPath "
                             "(a model with the vision/audio capability)");
    }
    media::MediaEmbedder& embedder = *model.media;
    const bool image = part.media == "image";
    if (!image && part.media != "audio") {
      return invalidArgument("Unknown prompt media \"" + part.media + "\" (image or audio)");
    }
    const bool samples = !image && part.path.empty();
    if (spans == nullptr) {
      auto count = image     ? embedder.count_image(part.path)
                   : samples ? embedder.count_audio(part.samples.size())
                             : embedder.count_audio_file(part.path);
      if (!count.ok()) return count.error();
      ids.insert(ids.end(), static_cast<size_t>(*count), 0);  // only the length counts
      continue;
    }
    auto item = image     ? embedder.image(part.path)
                : samples ? embedder.audio(part.samples.data(), part.samples.size())
                          : embedder.audio_file(part.path);
    if (!item.ok()) return item.error();
    if (media_ms != nullptr) *media_ms += item->encode_ms;
    item->span.offset += static_cast<int64_t>(ids.size());
    ids.insert(ids.end(), item->tokens.begin(), item->tokens.end());
    spans->push_back(std::move(item->span));
#else
    (void)spans;
    (void)media_ms;
    return invalidArgument("This native binary was built without image and audio input "
                           "(cpp/media)");
#endif
  }
  flush();
  return ids;
}

Result<int64_t> SeamCore::maxContextLength(Handle handle) {
  auto model = find(handle);
  if (!model.ok()) return model.error();
  return (*model)->max_context;
}

Result<void> SeamCore::saveSession(Handle handle, std::string path, bool tokens_only,
                                   std::string app_data, SessionDone done) {
  // The generation flag also keeps generate() and reset() out until the file is written.
  auto claimed = claim(handle,
                       "saveSession() while generating; await the generation or interrupt() first");
  if (!claimed.ok()) return claimed.error();
  std::shared_ptr<Model> model = *claimed;
  worker_->post([model, path = std::move(path), tokens_only, app_data = std::move(app_data),
                 done = std::move(done)] {
    auto saved = guarded("saving the session", [&] {
      return runner::SessionFile::save(model->runner->generator(), path, tokens_only, app_data);
    });
    model->running.store(false);
    done(std::move(saved));
  });
  return {};
}

Result<void> SeamCore::loadSession(Handle handle, std::string path, SessionDone done) {
  auto claimed = claim(handle,
                       "loadSession() while generating; await the generation or interrupt() "
                       "first (the conversation is unchanged)");
  if (!claimed.ok()) return claimed.error();
  std::shared_ptr<Model> model = *claimed;
  worker_->post([model, path = std::move(path), done = std::move(done)] {
    auto loaded = guarded("loading the session", [&] {
      return runner::SessionFile::load(model->runner->generator(), path);
    });
    model->running.store(false);
    done(std::move(loaded));
  });
  return {};
}

Result<void> SeamCore::createSession(Handle handle, LoadDone done) {
  auto found = find(handle);
  if (!found.ok()) return found.error();
  std::shared_ptr<Model> parent = *found;
  worker_->post([this, parent, done = std::move(done)] {
    // Released while this waited: its runner is gone (release() frees it on this thread).
    if (!parent->runner) {
      return done(invalidArgument("The model was released before the session was created"));
    }
    const uint64_t bytes = parent->runner->session_bytes();
    const auto available = availableMemoryBytes();
    if (available && bytes > *available) {
      return done(Error{runner::ErrorCode::kInsufficientMemory,
                        "A new session needs about " + std::to_string(bytes >> 20) +
                            " MiB for its KV caches and activations, but the system says only " +
                            std::to_string(*available >> 20) +
                            " MiB are available to this app; release a session first"});
    }
    auto made = guarded("creating a session", [&] { return parent->runner->new_session(); });
    if (!made.ok()) return done(made.error());
    auto model = std::make_shared<Model>();
    model->runner = std::move(made).value();
    model->tokenizer = parent->tokenizer;
    model->max_context = parent->max_context;
#ifdef RNE_WITH_MEDIA
    model->media = parent->media;
#endif
    done(add(std::move(model)));
  });
  return {};
}

Result<void> SeamCore::release(Handle handle) {
  std::shared_ptr<Model> model;
  {
    std::lock_guard<std::mutex> lock(models_mutex_);
    auto found = models_.find(handle);
    if (found == models_.end()) {
      return invalidArgument("Model handle " + std::to_string(handle) +
                             " is not loaded (released?)");
    }
    model = std::move(found->second);
    models_.erase(found);
  }
  model->stop_requested.store(true);
  model->runner->interrupt();
  // Freed on the worker once a running generation (which holds the model) has returned.
  worker_->post([model]() mutable { model->runner.reset(); });
  return {};
}

}  // namespace rne::seam

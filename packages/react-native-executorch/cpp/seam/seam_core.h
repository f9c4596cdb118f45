// The host-neutral half of the native seam (src/native/seam.ts, interface NativeExecutorch):
// the model table, the generate / interrupt / reset / release state machine, token-prefix
// KV-cache reuse, argument checks and error coding. Two hosts put it on a JS engine: the JSI
// host object (executorch_host_object.cpp, React Native) and the Node-API addon (cpp/node/,
// the end-to-end tests). A host only converts values and hops threads; it adds no behaviour.
//
// Threading: every method is called on the host's JS thread. Loads and generations run in
// order on one worker thread; their callbacks (LoadDone, OnPiece, GenerateDone) are called on
// that worker, in order, and the host forwards each to its JS thread through one FIFO queue.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memory_guard.h"
#include "platform_info.h"
#include "rne/runner/llm_runner.h"
#include "rne/runner/session_file.h"
#include "work_queue.h"

namespace rne::seam {

using runner::Error;
using runner::Result;
using Handle = int64_t;

// The seam's method names, as the hosts expose them.
inline constexpr std::array<const char*, 15> kMethodNames{
    "availableBackends", "platformInfo", "checkMemory",      "loadLLM",  "generate",
    "interrupt",         "reset",        "stats",            "countTokens",
    "maxContextLength",  "release",      "renderChatTemplate", "saveSession",
    "loadSession",       "createSession"};

// Reads the properties of one JS object; each host implements it over its own values.
class ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  // False when the property is missing (undefined).
  virtual bool has(const char* name) const = 0;
  // nullopt when the property is missing or of another type.
  virtual std::optional<double> number(const char* name) const = 0;
  virtual std::optional<bool> boolean(const char* name) const = 0;
  virtual std::optional<std::string> string(const char* name) const = 0;
  virtual std::optional<std::vector<std::string>> strings(const char* name) const = 0;
};

struct LoadOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string backend;  // a TypeScript backend name ("xnnpack")
  std::string vision_encoder_path;  // optional: the model's vision encoder program
  std::string audio_encoder_path;   // optional: the model's audio encoder program
  MemoryNeed memory;                // optional: the variant's measured peak (memory_guard.h)
};

// loadLLM's options object; invalid_argument names the bad field.
Result<LoadOptions> parseLoadOptions(const ObjectReader& options);
// The memory fields of loadLLM's options (peakMemoryBytes, smallerVariant,
// smallerVariantPeakBytes, availableMemoryBytes).
Result<MemoryNeed> parseMemoryNeed(const ObjectReader& options);
// checkMemory(need) against what the OS says now (or need.available_bytes): the seam's
// checkMemory, which an app calls before downloading a model, and loadLLM before loading it.
Result<void> checkMemoryNeed(const MemoryNeed& need);
// generate's config object (NativeGenerationConfig), read option by option from the table in
// seam_core.cpp (kGenerationOptions), then range-checked by the sampler's rules.
Result<runner::GenerationConfig> parseGenerationConfig(const ObjectReader& config);

// The same table for a host CLI that takes generate()'s options as flags (rne_llm): each row's
// JS name, whether it takes a value (a bool field is a switch), and the row's reader of a flag's
// text, which sets the field (appends, for a list) or says what is wrong, naming `flag`. Enum
// values are written in kebab case (prompt-lookup). The ranges are checked afterwards, by the
// runner's validate() as for the seam.
struct GenerationOptionText {
  const char* name;
  bool takes_value;
  Result<void> (*parse)(const std::string& flag, const std::string& text,
                        runner::GenerationConfig& config);
};
std::vector<GenerationOptionText> generationOptionsAsText();
// "topP" -> "top-p": how a CLI spells a JS name.
std::string kebabCase(std::string_view camel);

// A GenerationStats object in the seam's field names: numbers, then the stop reason.
struct StatsFields {
  std::vector<std::pair<const char*, double>> numbers;
  const char* stop_reason;
};
StatsFields statsFields(const runner::Stats& stats);

// One stretch of a prompt (src/native/seam.ts PromptPart): template text, whose special-token
// text is those tokens, or plain text (what a user, a tool or the app wrote), whose special-token
// text is ordinary text, so it cannot end a turn or open one. A host turns a prompt given as one
// string into one template part.
// A media part (`media` set: "image" or "audio") stands for a file at `path` (a JPEG/PNG, a
// 16 kHz mono WAV) or, for audio, 16 kHz mono float `samples`; it becomes the model's begin
// marker, the item's soft tokens and its end marker.
struct PromptPart {
  std::string text;
  bool plain = false;
  std::string media;
  std::string path;
  std::vector<float> samples;
};
using Prompt = std::vector<PromptPart>;
// What hosts say when a prompt argument has another shape.
inline constexpr const char* kPromptShape =
    "a string or an array of {text: string, plain?: boolean}, {media: 'image' | 'audio', path: "
    "string} and {media: 'audio', samples: Float32Array}";
// The ids of a text-only prompt: its parts encoded as one text
// (tokenizer::Tokenizer::encode_parts), nothing added.
std::vector<int64_t> encodePrompt(const tokenizer::Tokenizer& tokenizer, const Prompt& prompt);

// An invalid_argument error (bad arguments a host found while converting them).
Error invalidArgument(std::string message);

class SeamCore : public std::enable_shared_from_this<SeamCore> {
 public:
  using LoadDone = std::function<void(Result<Handle>)>;
  // A decoded text piece and the number of tokens generated so far.
  using OnPiece = std::function<void(std::string piece, int64_t generated_tokens)>;
  using GenerateDone = std::function<void(Result<runner::Stats>)>;

  explicit SeamCore(PlatformInfo platform);
  ~SeamCore();  // interrupts every generation, then waits for the worker to drain
  SeamCore(const SeamCore&) = delete;
  SeamCore& operator=(const SeamCore&) = delete;

  const PlatformInfo& platformInfo() const { return platform_; }
  // TypeScript names of the backends this binary links and this device can run.
  std::vector<std::string> availableBackends() const;

  // An error means "reject now"; otherwise `done` is called on the worker once loaded.
  Result<void> loadLLM(LoadOptions options, LoadDone done);
  // Errors: invalid_argument (unknown handle), busy. Otherwise pieces then `done`, on the worker.
  // The prompt is encoded by encodePrompt (nothing added); the KV cache keeps its longest common
  // token prefix with the prompt and only the rest is prefilled (LlmRunner::generate_prompt).
  Result<void> generate(Handle handle, Prompt prompt, runner::GenerationConfig config,
                        OnPiece on_piece, GenerateDone done);
  // Synchronous calls; invalid_argument for an unknown (released) handle.
  Result<void> interrupt(Handle handle);
  Result<void> reset(Handle handle);  // busy while generating
  Result<std::optional<runner::Stats>> stats(Handle handle);
  // Tokens `prompt` encodes into (encodePrompt). Runs on the calling thread with the model's
  // tokenizer, so it never waits for a generation.
  Result<int64_t> countTokens(Handle handle, const Prompt& prompt);
  // The model's KV-cache capacity (get_max_context_len).
  Result<int64_t> maxContextLength(Handle handle);
  Result<void> release(Handle handle);
  // Saved sessions (runner/session_file.h), run on the worker after the model's queued work.
  // Errors now: invalid_argument (unknown handle), busy (a generation or another session call
  // runs; the conversation is unchanged). Otherwise `done` on the worker: the file's facts, or
  // the save's or load's error (a load that fails leaves the conversation as it was).
  using SessionDone = std::function<void(Result<runner::SessionInfo>)>;
  Result<void> saveSession(Handle handle, std::string path, bool tokens_only,
                           std::string app_data, SessionDone done);
  Result<void> loadSession(Handle handle, std::string path, SessionDone done);
  // Another conversation over the model `handle` holds (LlmRunner::new_session): a new handle
  // with its own KV caches, prefix reuse, stats and session files, sharing the weights (packed
  // once), the tokenizer and the encoders. Every method above takes it; releasing one handle
  // leaves the others loaded. The generations of all handles run one at a time on the worker,
  // in the order they were asked for (FIFO), so none is interleaved inside another's forward;
  // a second generate() on the same handle is busy. Errors now: invalid_argument (unknown
  // handle). Otherwise `done` on the worker: the new handle, insufficient_memory when its
  // caches and activations exceed what the OS says is available, or invalid_argument for a
  // program whose delegate keeps its own weights (Vulkan, MLX: use saveSession/loadSession).
  Result<void> createSession(Handle handle, LoadDone done);

 private:
  struct Model;
  Result<std::shared_ptr<Model>> find(Handle handle);
  // Puts a loaded or created model in the table under a new handle.
  Handle add(std::shared_ptr<Model> model);
  // The model for work that excludes a generation (generate, saveSession, loadSession): its
  // running flag set, or kBusy with `busy` when it was set already.
  Result<std::shared_ptr<Model>> claim(Handle handle, const char* busy);
  // The prompt's ids, its text runs encoded as one text each and its media parts as their
  // tokens; with `spans`, the media parts are also encoded into them (on the worker only) and
  // `media_ms` gains the encoders' time.
  static Result<std::vector<int64_t>> encode(Model& model, const Prompt& prompt,
                                             std::vector<runner::MediaSpan>* spans,
                                             double* media_ms = nullptr);
  void runGeneration(Model& model, const Prompt& prompt,
                     const runner::GenerationConfig& config, const OnPiece& on_piece,
                     const GenerateDone& done);

  PlatformInfo platform_;
  std::mutex models_mutex_;
  std::unordered_map<Handle, std::shared_ptr<Model>> models_;  // guarded by models_mutex_
  Handle next_handle_ = 1;                                     // guarded by models_mutex_
  std::unique_ptr<WorkQueue> worker_;  // destroyed first: its tasks use the models
};

}  // namespace rne::seam

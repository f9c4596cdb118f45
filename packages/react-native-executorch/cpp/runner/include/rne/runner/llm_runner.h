// The runner's public API, the one the host CLI and the React Native binding (cpp/jsi/) use:
//
//   auto runner = rne::runner::LlmRunner::load("model.pte", "tokenizer.json");
//   if (!runner.ok()) { report(runner.error()); return; }
//   rne::runner::GenerationConfig config;           // greedy, 256 new tokens
//   auto stats = (*runner)->generate(prompt, config, [](std::string_view text) { show(text); });
//
// One conversation per runner: each generate() appends to the KV cache (only new tokens are
// prefilled), reset() starts over. interrupt() may be called from any thread. Every fallible
// call returns a Result; nothing throws.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rne/runner/backends.h"
#include "rne/grammar/gbnf_constraint.h"
#include "rne/grammar/json_constraint.h"
#include "rne/runner/model_session.h"
#include "rne/runner/result.h"
#include "rne/runner/sampler.h"
#include "rne/runner/text_generator.h"

namespace rne::tokenizer {
class Tokenizer;
}

namespace rne::runner {

// Receives generated text in order. Pieces are always whole UTF-8 characters, never contain
// a stop string or what follows it, and never contain special tokens (e.g. <|im_end|>) other
// than those GenerationConfig::keep_special_tokens names.
using TextCallback = std::function<void(std::string_view text)>;

// Ok when `text` is valid UTF-8; otherwise kInvalidArgument naming `what` (e.g. "prompt") and
// the first bad byte. Text input is rejected rather than changed: the tokenizer would replace
// or drop such bytes and the model would answer a different prompt than the caller sent.
Result<void> check_utf8(std::string_view text, const std::string& what);

class LlmRunner {
 public:
  // Loads the .pte (memory-mapped) and the tokenizer.json. Errors say which file and why.
  static Result<std::unique_ptr<LlmRunner>> load(const std::string& model_path,
                                                 const std::string& tokenizer_path);
  // The same with the model's bytes already held (ModelFile::open), e.g. after checking them.
  static Result<std::unique_ptr<LlmRunner>> load(std::shared_ptr<const ModelFile> model,
                                                 const std::string& tokenizer_path);
  ~LlmRunner();

  // Another conversation over this loaded model: its own KV caches, position, constraint and
  // stats; the program's bytes (one mapping), its packed weights (XNNPACK's weight cache, see
  // ModelSession::shares_weights) and the tokenizer are shared, so it costs its
  // ModelSession::planned_bytes and tens of ms. The two runners are independent objects: either
  // may be destroyed first. They must not generate at the same time (one forward at a time per
  // process: the seam's worker runs them in turn). A program whose delegates keep their own
  // weights (Vulkan, MLX, Core ML) would load them again: kInvalidArgument, which says to switch
  // conversations with session files instead.
  Result<std::unique_ptr<LlmRunner>> new_session() const;
  // What each session holds of its own: `forward`'s planned arenas (KV caches, activations).
  uint64_t session_bytes() const { return session_bytes_; }

  // Encodes `prompt` as is (no <bos> or other post-processor tokens: a chat template already
  // writes them; use encode() + the token overload to control that) and generates. A prompt that
  // is not valid UTF-8 is an kInvalidArgument error (see check_utf8).
  Result<Stats> generate(const std::string& prompt, const GenerationConfig& config,
                         const TextCallback& on_text);
  // Same, from token ids (e.g. the JS side tokenized, or a test needs exact ids).
  Result<Stats> generate(const std::vector<int64_t>& tokens, const GenerationConfig& config,
                         const TextCallback& on_text);
  // Generates from the whole conversation `prompt`, prefilling only what the KV cache does not
  // share with it (TextGenerator::generate_prompt: longest common prefix, rewind).
  // `media` places image or audio embeddings at the prompt's soft tokens (TextGenerator).
  Result<Stats> generate_prompt(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                                const TextCallback& on_text,
                                const std::vector<MediaSpan>& media = {});

  // Tokenizes with the model's tokenizer; add_special_tokens applies its post-processor.
  // Invalid UTF-8 is replaced, not reported: check_utf8() text from users first.
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(const std::vector<int64_t>& tokens) const;
  // The tokenizer, e.g. to copy (cheap, thread-safe) for counting tokens on another thread.
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }

  void interrupt() { generator_->interrupt(); }  // any thread; generate() returns kInterrupted
  void reset() { generator_->reset(); }
  // The token-level conversation, e.g. to save or load it (session_file.h). Not while a
  // generate() runs.
  TextGenerator& generator() { return *generator_; }

  const ModelContract& contract() const { return generator_->contract(); }
  int64_t position() const { return generator_->position(); }  // KV positions in use
  double load_ms() const { return load_ms_; }
  const Stats& last_stats() const { return last_stats_; }
  // Token ids the last generate() produced (including a final EOS id, if any).
  const std::vector<int64_t>& last_tokens() const { return last_tokens_; }

 private:
  LlmRunner() = default;
  // The text pipeline (decoder -> whole characters -> stop strings -> on_text) around one
  // token-level generation `run`.
  // `config` with its json_schema, regex or grammar (if any) compiled into config.constraint: a
  // constraint owned by the runner; the same one again reuses its cached masks. Errors: an
  // invalid or unsupported schema, regex or grammar, or more than one (kInvalidArgument).
  Result<GenerationConfig> with_json_constraint(const GenerationConfig& config);
  Result<Stats> generate_text(const std::function<Result<Stats>(const TokenSink&)>& run,
                              const GenerationConfig& config, const TextCallback& on_text);
  std::unique_ptr<TextGenerator> generator_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::shared_ptr<const ModelFile> model_file_;  // what new_session() loads again
  bool shares_weights_ = false;
  uint64_t session_bytes_ = 0;
  double load_ms_ = 0;
  Stats last_stats_;
  std::vector<int64_t> last_tokens_;
  // Built on the first json_schema_constraint().
  std::shared_ptr<const grammar::TokenTrie> token_trie_;
  std::vector<std::string> token_trie_kept_;  // the kept special tokens it gives bytes (sorted)
  std::string json_schema_;  // the syntax, kept tokens and schema (or marked regex)
                             // json_constraint_ was built for
  std::unique_ptr<grammar::JsonSchemaConstraint> json_constraint_;
  // Instead of json_constraint_ for a grammar.
  std::unique_ptr<grammar::GbnfConstraint> gbnf_constraint_;
};

}  // namespace rne::runner

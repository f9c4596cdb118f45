// The token-level generation loop over one ModelSession: chunked prefill, decode with T=1,
// sampling, stop conditions, the generation budget, KV-cache reuse across calls, interrupt and
// stats. Text (tokenizer, UTF-8 streaming, stop strings) lives one level up, in LlmRunner.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "rne/grammar/json_schema.h"
#include "rne/runner/model_session.h"
#include "rne/runner/result.h"
#include "rne/runner/sampler.h"

namespace rne::runner {

enum class StopReason {
  kEos,            // the model produced one of the contract's EOS ids
  kStopString,    // the token callback asked to stop (LlmRunner: a stop string appeared)
  kMaxNewTokens,  // GenerationConfig::max_new_tokens reached
  kContextFull,   // the KV cache has no position left
  kInterrupted,   // interrupt() was called from another thread
};

const char* stop_reason_name(StopReason reason);

// Speculative decoding: a drafter proposes the next tokens, the program's `verify` method scores
// them all in one forward (.pte contract, docs/design.md), and the longest prefix the target
// itself would have produced is kept. Drafters are deterministic, so the rule "keep a drafted
// token while the target's own sample at that position equals it" keeps the target's sampling
// distribution exactly (it is rejection sampling with a point-mass draft), greedy or not.
enum class Drafter {
  kNone,
  kPromptLookup,  // copies what followed the latest n-gram's previous occurrence in the context
  kAssistant,     // a separate drafter program (Gemma 4's assistant)
};

const char* drafter_name(Drafter drafter);

struct SpeculativeConfig {
  Drafter drafter = Drafter::kNone;
  // Most tokens drafted per round, 1 .. the program's max_verify - 1 (0 = that bound). Prompt
  // lookup drafts fewer, or none, where the round is not expected to pay for them
  // (PromptLookupDrafter).
  int32_t max_draft_tokens = 0;
  // Prompt lookup: the longest and shortest n-grams matched against the context. A single
  // token recurs too often to predict what follows it: on SmolLM2's copy-heavy and chat prompts
  // (tools/benchmarks/speculative_benchmark.py) n-grams of 2 or more keep more drafts and
  // decode faster than 1.
  int32_t ngram_max = 3;
  int32_t ngram_min = 2;
  // Prompt lookup: false drafts every token a match offers, up to max_draft_tokens, whatever
  // the round costs. Not a host option: for the tests of verify and rollback, which need drafts
  // on random weights.
  bool adaptive_draft_length = true;
};

struct GenerationConfig {
  // Upper bound on generated tokens; 0 means "until EOS or the context is full", a negative
  // value is an kInvalidArgument error. The budget actually used is
  // min(max_new_tokens, max_context - tokens in the cache after prefill).
  int32_t max_new_tokens = 256;
  SamplerConfig sampling;
  bool stop_on_eos = true;                 // false keeps generating past EOS (benchmarks)
  std::vector<std::string> stop_strings;   // applied by LlmRunner to the decoded text
  // Applied by LlmRunner: texts of special tokens the streamed text keeps (e.g. Gemma 4's
  // `<|channel>`, `<|tool_call>`); every other special token adds no text. Unknown texts are an
  // kInvalidArgument error. Stopping on EOS does not depend on it.
  std::vector<std::string> keep_special_tokens;
  // Applied by LlmRunner: a JSON Schema (its JSON text; empty = none) the answer must be one
  // document of, enforced by grammar-constrained sampling (json_schema.h lists what is
  // supported). LlmRunner turns it into `constraint`.
  std::string json_schema;
  // How that document is written: JSON, or Gemma 4's tool-call argument syntax (json_schema.h).
  // Gemma 4's <|"|> token quotes strings only when keep_special_tokens names it.
  grammar::JsonSyntax json_syntax = grammar::JsonSyntax::kJson;
  // Strict: the schema's unknown keywords and `format` values are refused (kInvalidArgument)
  // instead of ignored as annotations, so nothing in it goes unenforced (json_schema.h).
  bool json_strict = false;
  // Applied by LlmRunner: a regex (regex.h's subset; empty = none) the whole answer must match,
  // enforced the same way. At most one of json_schema, regex and grammar.
  std::string regex;
  // Applied by LlmRunner: a GBNF grammar (gbnf.h; empty = none) whose root the whole answer is
  // a sentence of, enforced the same way.
  std::string grammar;
  // Restricts sampling to the tokens it allows and is advanced with each generated token (a
  // grammar, e.g. JsonSchemaConstraint). Not owned; must outlive the generate() call.
  grammar::TokenConstraint* constraint = nullptr;
  SpeculativeConfig speculative;
};

struct Stats {
  double load_ms = 0;          // ModelSession::load (+ tokenizer, in LlmRunner)
  double encode_ms = 0;        // prompt tokenization (LlmRunner only)
  // Images and audio through their encoders before the call (set by the caller that embeds
  // them: the seam, rne_llm); 0 for media whose rows came from the embedder's cache. Part of
  // ttft_ms.
  double media_encode_ms = 0;
  double prefill_ms = 0;       // all prefill forward calls of this generate()
  double ttft_ms = 0;          // generate() start to the first generated token
  double decode_ms = 0;        // first generated token to the end of generate()
  double sampling_ms = 0;      // time inside the sampler, summed
  int64_t prompt_tokens = 0;   // tokens prefilled by this call (only the new ones)
  int64_t reused_tokens = 0;   // prompt tokens already in the cache (generate_prompt only)
  int64_t generated_tokens = 0;
  int64_t cache_tokens = 0;    // positions in use in the KV cache after the call
  // Speculative decoding (zero without it): tokens proposed by the drafter, how many of them
  // were kept, and the decode forward calls (verify or plain) of this generate().
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  int64_t decode_forwards = 0;
  StopReason stop_reason = StopReason::kMaxNewTokens;

  double prefill_tokens_per_s() const;
  // Decode rate over the tokens that needed a T=1 forward (all but the first, which comes from
  // the prefill's logits).
  double decode_tokens_per_s() const;
  // accepted / drafted, 0 without drafts.
  double acceptance_rate() const;
};

// Positions of a prompt that hold an encoder's output (an image's or a clip's soft tokens): the
// model takes `rows` (count x ModelContract::embeds_width floats) there instead of the token
// embeddings. `key` identifies the content (e.g. a hash of the file): the KV cache is reused
// across calls only where both the token and the key match, since every image's soft tokens
// have the same id.
struct MediaSpan {
  int64_t offset = 0;  // first position, relative to the token vector it comes with
  int64_t count = 0;
  uint64_t key = 0;    // nonzero
  std::shared_ptr<const std::vector<float>> rows;
};

// Called once per generated token, in order; return false to stop (reported as kStopString).
using TokenSink = std::function<bool(int64_t token)>;

class TextGenerator {
 public:
  explicit TextGenerator(std::unique_ptr<ModelSession> session);

  const ModelContract& contract() const { return session_->contract(); }

  // Appends `new_tokens` to the conversation in the cache, prefills only what the cache does
  // not hold yet (the previous call's last generated token, then `new_tokens`) in chunks of
  // max_chunk, and generates. Errors: empty input with nothing pending, a token outside the
  // vocabulary, a prompt that does not fit in the remaining context, a runtime failure.
  // `media` places encoder rows in `new_tokens` (offsets relative to it); every media token id
  // of the contract must lie in one span, and spans only on media tokens.
  Result<Stats> generate(const std::vector<int64_t>& new_tokens, const GenerationConfig& config,
                         const TokenSink& sink, const std::vector<MediaSpan>& media = {});

  // Generates from the whole `prompt` (the conversation so far), reusing the cache: keeps the
  // longest common prefix of the cached conversation (cache + the pending last token) and
  // `prompt`, rewinds the cache to it (or starts over where rewind() cannot be exact) and
  // prefills only the rest. At least one prompt token is always prefilled (its logits give the
  // first answer token). Stats::reused_tokens counts the tokens kept.
  Result<Stats> generate_prompt(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                                const TokenSink& sink, const std::vector<MediaSpan>& media = {});

  // Prefills without generating (e.g. a system prompt), so the next generate() starts from it.
  Result<Stats> prefill(const std::vector<int64_t>& new_tokens);

  // Forgets the cached positions from `position` on (and the pending token), so the next
  // generate() continues at `position`; the model's input_pos makes the stale keys beyond
  // invisible. A ring-buffer cache may no longer hold keys that positions before `position`
  // need once any position >= the ring's size was written (when the file does not declare its
  // ring size, max_chunk, the smallest ring a chunked prefill allows, is assumed). Then the
  // cache goes back to the latest checkpoint at or before `position` instead (position() says
  // where), or, without one, reset()s and returns false. Not while a generate() runs.
  bool rewind(int64_t position);

  // Each prefill of kCheckpointMargin or more tokens, on a model with ring caches, saves the
  // rings' state that many tokens before its end: a chat template that re-renders the last
  // turn differently (Gemma 4 drops the generation prompt's empty thought channel and the
  // thought) makes the next turn diverge in that tail or later, and the checkpoint lets it
  // rewind there however far the rings have turned. The newest kMaxCheckpoints are kept.
  static constexpr int64_t kCheckpointMargin = 16;
  static constexpr size_t kMaxCheckpoints = 2;
  size_t checkpoint_count() const { return checkpoints_.size(); }
  // On by default; off drops the checkpoints (benchmarks compare both).
  void set_checkpoints(bool on) {
    checkpoints_enabled_ = on;
    if (!on) checkpoints_.clear();
  }

  // Asks a running generate() to stop after the current forward call. Safe from any thread.
  // During decode the tokens so far are kept; during prefill the chunks already fed stay in the
  // cache and the rest of the input is dropped (the caller usually reset()s after that).
  void interrupt() { interrupted_.store(true, std::memory_order_relaxed); }

  // Forgets the conversation: the next generate() starts at position 0. Not while a generate()
  // runs (interrupt it and wait for it to return first).
  void reset();

  // Tokens whose keys/values are in the cache, in position order.
  const std::vector<int64_t>& cached_tokens() const { return cached_; }
  // Logits the latest forward call produced (after prefill(): the next-token distribution).
  // Valid until the next call that runs the model.
  LogitsView last_logits() const { return logits_; }
  int64_t position() const { return static_cast<int64_t>(cached_.size()); }

 private:
  friend class SessionAccess;  // session_file.cpp: saves and restores the conversation
  std::unique_ptr<ModelSession> session_;
  std::vector<int64_t> cached_;   // tokens in the KV cache
  std::vector<uint64_t> cached_keys_;  // per cached position: its MediaSpan key, 0 for text
  std::vector<int64_t> pending_;  // generated but not yet fed (the last token of a turn)
  int64_t high_water_ = 0;        // most positions written since the last reset()
  struct Checkpoint {
    int64_t position;    // cached_.size() when it was taken
    int64_t high_water;  // high_water_ then
    std::vector<uint8_t> rings;
  };
  std::vector<Checkpoint> checkpoints_;  // oldest first
  bool checkpoints_enabled_ = true;
  void save_checkpoint();
  // Checks `media` against `new_tokens` and fills, per position of the fed tokens (new_tokens
  // shifted by `shift` pending tokens), its span key and row.
  Result<void> place_media(const std::vector<MediaSpan>& media,
                           const std::vector<int64_t>& new_tokens, size_t shift,
                           std::vector<uint64_t>& keys, std::vector<const float*>& rows) const;
  // Drafts per round that `spec` asks of this program (0: plain decode), or why it cannot.
  Result<int64_t> speculation_bound(const SpeculativeConfig& spec, bool prefill_only) const;
  // The embeds input of the chunk [offset, offset + count): null when it has no media.
  const float* chunk_embeds(const std::vector<const float*>& rows, size_t offset, size_t count);
  std::vector<float> chunk_embeds_;
  LogitsView logits_;
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> running_{false};
};

}  // namespace rne::runner

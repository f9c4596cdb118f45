#include "rne/runner/text_generator.h"

#include "rne/runner/assistant_drafter.h"
#include "rne/runner/prompt_lookup.h"
#include "rne/runner/speculative_options.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

namespace rne::runner {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Clears the running flag however generate() returns.
class RunningGuard {
 public:
  explicit RunningGuard(std::atomic<bool>& flag) : flag_(flag) {}
  ~RunningGuard() { flag_.store(false); }

 private:
  std::atomic<bool>& flag_;
};

// Tokens generate() may sample when `room` cache positions are free after the prefill.
int64_t token_budget(const GenerationConfig& config, int64_t room) {
  return config.max_new_tokens > 0 ? std::min<int64_t>(config.max_new_tokens, room) : room;
}

}  // namespace

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kEos: return "eos";
    case StopReason::kStopString: return "stop_string";
    case StopReason::kMaxNewTokens: return "max_new_tokens";
    case StopReason::kContextFull: return "context_full";
    case StopReason::kInterrupted: return "interrupted";
  }
  return "unknown";
}

const char* drafter_name(Drafter drafter) {
  switch (drafter) {
    case Drafter::kNone: return "none";
    case Drafter::kPromptLookup: return "promptLookup";
    case Drafter::kAssistant: return "assistant";
  }
  return "unknown";
}

double Stats::acceptance_rate() const {
  return drafted_tokens > 0 ? static_cast<double>(accepted_tokens) / drafted_tokens : 0.0;
}

double Stats::prefill_tokens_per_s() const {
  return prefill_ms > 0 ? prompt_tokens * 1000.0 / prefill_ms : 0.0;
}

double Stats::decode_tokens_per_s() const {
  return decode_ms > 0 && generated_tokens > 1 ? (generated_tokens - 1) * 1000.0 / decode_ms
                                               : 0.0;
}

TextGenerator::TextGenerator(std::unique_ptr<ModelSession> session)
    : session_(std::move(session)) {}

void TextGenerator::reset() {
  cached_.clear();
  cached_keys_.clear();
  pending_.clear();
  checkpoints_.clear();
  high_water_ = 0;
  logits_ = {};
}

void TextGenerator::save_checkpoint() {
  if (!checkpoints_.empty() && checkpoints_.back().position == position()) return;
  if (checkpoints_.size() == kMaxCheckpoints) checkpoints_.erase(checkpoints_.begin());
  Checkpoint checkpoint{position(), high_water_, {}};
  session_->save_ring_state(checkpoint.rings);
  checkpoints_.push_back(std::move(checkpoint));
}

bool TextGenerator::rewind(int64_t position) {
  if (position >= this->position()) {
    pending_.clear();
    return position == this->position();
  }
  position = std::max<int64_t>(position, 0);
  // Checkpoints past the new end describe positions that are about to be overwritten.
  while (!checkpoints_.empty() && checkpoints_.back().position > position) checkpoints_.pop_back();
  const ModelContract& c = contract();
  const int64_t ring = c.kv_ring_size >= 0 ? c.kv_ring_size : c.max_chunk;
  // A ring that never wrapped holds every key it was given; the stale slots past `position`
  // read as never written (negative positions) and are masked. Flat caches mask by input_pos.
  if (ring > 0 && high_water_ > ring) {
    if (checkpoints_.empty()) {
      reset();
      return false;
    }
    // The rings as they were at the checkpoint; flat caches hold every position before it.
    const Checkpoint& checkpoint = checkpoints_.back();
    session_->restore_ring_state(checkpoint.rings);
    position = checkpoint.position;
    high_water_ = checkpoint.high_water;
  }
  cached_.resize(static_cast<size_t>(position));
  cached_keys_.resize(cached_.size());
  pending_.clear();
  logits_ = {};
  return true;
}

Result<void> TextGenerator::place_media(const std::vector<MediaSpan>& media,
                                        const std::vector<int64_t>& new_tokens, size_t shift,
                                        std::vector<uint64_t>& keys,
                                        std::vector<const float*>& rows) const {
  const ModelContract& c = contract();
  auto is_media = [&](int64_t id) {
    return std::find(c.media_token_ids.begin(), c.media_token_ids.end(), id) !=
           c.media_token_ids.end();
  };
  const auto width = static_cast<size_t>(c.embeds_width);
  for (const MediaSpan& span : media) {
    if (c.embeds_width == 0) {
      return Error{ErrorCode::kInvalidArgument,
                   "this model takes text only: its program has no input for image or audio "
                   "embeddings; use a variant exported with its encoders"};
    }
    if (span.offset < 0 || span.count < 1 ||
        span.offset + span.count > static_cast<int64_t>(new_tokens.size()) || span.key == 0 ||
        span.rows == nullptr || span.rows->size() != static_cast<size_t>(span.count) * width) {
      return Error{ErrorCode::kInvalidArgument,
                   "a media span must cover 1 or more prompt positions with a nonzero key and " +
                       std::to_string(c.embeds_width) + " floats per position"};
    }
    for (int64_t i = 0; i < span.count; ++i) {
      const size_t at = shift + static_cast<size_t>(span.offset + i);
      if (!is_media(new_tokens[static_cast<size_t>(span.offset + i)]) || keys[at] != 0) {
        return Error{ErrorCode::kInvalidArgument,
                     "media spans must cover media soft tokens only, each once"};
      }
      keys[at] = span.key;
      rows[at] = span.rows->data() + static_cast<size_t>(i) * width;
    }
  }
  for (size_t i = 0; i < new_tokens.size(); ++i) {
    if (is_media(new_tokens[i]) && keys[shift + i] == 0) {
      return Error{ErrorCode::kInvalidArgument,
                   "prompt position " + std::to_string(i) + " holds a media soft token (" +
                       std::to_string(new_tokens[i]) + ") without an image or clip for it"};
    }
  }
  return {};
}

const float* TextGenerator::chunk_embeds(const std::vector<const float*>& rows, size_t offset,
                                         size_t count) {
  const auto width = static_cast<size_t>(contract().embeds_width);
  bool any = false;
  for (size_t i = offset; i < offset + count; ++i) any = any || rows[i] != nullptr;
  if (!any) return nullptr;
  chunk_embeds_.assign(count * width, 0.0f);
  for (size_t i = 0; i < count; ++i) {
    if (const float* row = rows[offset + i]; row != nullptr) {
      std::copy(row, row + width, chunk_embeds_.begin() + static_cast<std::ptrdiff_t>(i * width));
    }
  }
  return chunk_embeds_.data();
}

Result<Stats> TextGenerator::generate_prompt(const std::vector<int64_t>& prompt,
                                             const GenerationConfig& config,
                                             const TokenSink& sink,
                                             const std::vector<MediaSpan>& media) {
  if (running_.load()) {
    return Error{ErrorCode::kBusy, "generate() is already running on this runner; wait for it "
                                   "or call interrupt()"};
  }
  if (prompt.empty()) {
    return Error{ErrorCode::kInvalidArgument, "nothing to generate from: the prompt is empty"};
  }
  // The conversation as the model has seen it: the cache, then the not yet fed last token.
  std::vector<uint64_t> keys(prompt.size(), 0);
  for (const MediaSpan& span : media) {
    if (span.offset < 0 || span.count < 0 ||
        span.offset + span.count > static_cast<int64_t>(prompt.size())) {
      return Error{ErrorCode::kInvalidArgument, "a media span lies outside the prompt"};
    }
    std::fill_n(keys.begin() + span.offset, span.count, span.key);
  }
  size_t common = 0;
  const size_t known = cached_.size() + pending_.size();
  while (common < known && common < prompt.size()) {
    const bool in_cache = common < cached_.size();
    const int64_t token = in_cache ? cached_[common] : pending_[common - cached_.size()];
    const uint64_t key = in_cache ? cached_keys_[common] : 0;
    if (token != prompt[common] || key != keys[common]) break;
    ++common;
  }
  // Keep at least one prompt token to feed: its logits give the first answer token.
  if (common >= prompt.size()) common = prompt.size() - 1;
  if (common < cached_.size()) {
    rewind(static_cast<int64_t>(common));  // resets where a rewind cannot be exact
  }
  pending_.clear();  // a matching pending token is fed again below, as part of the prompt
  const size_t reused = cached_.size();
  // The spans (or their tails) that fall in what is fed, relative to it.
  std::vector<MediaSpan> fed_media;
  for (const MediaSpan& span : media) {
    const int64_t end = span.offset + span.count;
    if (end <= static_cast<int64_t>(reused)) continue;
    MediaSpan fed = span;
    const int64_t skip = std::max<int64_t>(0, static_cast<int64_t>(reused) - span.offset);
    fed.offset = span.offset + skip - static_cast<int64_t>(reused);
    fed.count = span.count - skip;
    if (skip > 0) {
      const auto width = static_cast<size_t>(contract().embeds_width);
      fed.rows = std::make_shared<const std::vector<float>>(
          span.rows->begin() + static_cast<std::ptrdiff_t>(skip * width), span.rows->end());
    }
    fed_media.push_back(std::move(fed));
  }
  auto stats = generate(std::vector<int64_t>(prompt.begin() + static_cast<std::ptrdiff_t>(reused),
                                             prompt.end()),
                        config, sink, fed_media);
  if (stats.ok()) stats->reused_tokens = static_cast<int64_t>(reused);
  return stats;
}

Result<Stats> TextGenerator::prefill(const std::vector<int64_t>& new_tokens) {
  GenerationConfig config;
  config.max_new_tokens = 0;
  return generate(new_tokens, config, nullptr);
}

Result<int64_t> TextGenerator::speculation_bound(const SpeculativeConfig& spec,
                                                 bool prefill_only) const {
  if (auto valid = validate(spec); !valid.ok()) return valid.error();
  if (spec.drafter == Drafter::kNone || prefill_only) return int64_t{0};
  const ModelContract& c = contract();
  if (spec.drafter == Drafter::kAssistant && c.draft_hidden == 0) {
    return Error{ErrorCode::kInvalidArgument,
                 "speculative drafter 'assistant' needs an assistant program for this model, and "
                 "none is loaded: " + session_->path() + " has no 'draft' method (export it with "
                 "tools/export_model.py --assistant <checkpoint dir>; Gemma 4 on XNNPACK), or "
                 "use 'promptLookup'"};
  }
  if (c.max_verify == 0) {
    return Error{ErrorCode::kInvalidModel,
                 session_->path() + " has no 'verify' method, which speculative decoding needs: "
                                    "re-export it with tools/export_model.py --verify-tokens 8 "
                                    "(XNNPACK), or turn speculative decoding off"};
  }
  const int64_t most = c.max_verify - 1;
  if (spec.max_draft_tokens > most) {
    return Error{ErrorCode::kInvalidArgument,
                 "max_draft_tokens " + std::to_string(spec.max_draft_tokens) + " must be 1.." +
                     std::to_string(most) + " for this model: its program verifies at most " +
                     std::to_string(c.max_verify) + " tokens a call (the last token and " +
                     std::to_string(most) + " drafts)"};
  }
  return spec.max_draft_tokens > 0 ? int64_t{spec.max_draft_tokens} : most;
}

Result<Stats> TextGenerator::generate(const std::vector<int64_t>& new_tokens,
                                      const GenerationConfig& config, const TokenSink& sink,
                                      const std::vector<MediaSpan>& media) {
  if (running_.exchange(true)) {
    return Error{ErrorCode::kBusy, "generate() is already running on this runner; wait for it "
                                   "or call interrupt()"};
  }
  RunningGuard guard(running_);
  interrupted_.store(false);
  const auto start = Clock::now();
  const ModelContract& contract = session_->contract();
  const bool prefill_only = sink == nullptr;

  if (auto valid = validate(config.sampling); !valid.ok()) return valid.error();
  if (config.max_new_tokens < 0) {
    return Error{ErrorCode::kInvalidArgument,
                 "max_new_tokens must be >= 0 (0 = until EOS or the context is full), got " +
                     std::to_string(config.max_new_tokens)};
  }
  for (int64_t id : new_tokens) {
    if (id < 0 || id >= contract.vocab_size) {
      return Error{ErrorCode::kInvalidArgument,
                   "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                       std::to_string(contract.vocab_size - 1) +
                       "); the tokenizer does not match this model"};
    }
  }
  // What the cache does not hold yet: last turn's final token, then this turn's input.
  std::vector<int64_t> to_feed = pending_;
  to_feed.insert(to_feed.end(), new_tokens.begin(), new_tokens.end());
  // Per position of to_feed: its media span's key (0 for text) and where its row is.
  std::vector<uint64_t> feed_keys(to_feed.size(), 0);
  std::vector<const float*> feed_rows(to_feed.size(), nullptr);
  if (auto placed = place_media(media, new_tokens, pending_.size(), feed_keys, feed_rows);
      !placed.ok()) {
    return placed.error();
  }
  if (to_feed.empty()) {
    return Error{ErrorCode::kInvalidArgument, "nothing to generate from: the prompt is empty"};
  }
  const int64_t free_positions = contract.max_context - position();
  if (static_cast<int64_t>(to_feed.size()) > free_positions) {
    return Error{ErrorCode::kContextFull,
                 "the prompt needs " + std::to_string(to_feed.size()) + " positions but only " +
                     std::to_string(free_positions) + " of " +
                     std::to_string(contract.max_context) +
                     " are free; call reset() or shorten the conversation"};
  }

  if (config.constraint != nullptr && !prefill_only) {
    // Refused before the prefill: the constraint could not finish its output in the budget.
    const int64_t room = free_positions - static_cast<int64_t>(to_feed.size());
    const int64_t budget = token_budget(config, room);
    const int64_t needed = config.constraint->min_tokens();
    if (budget < needed) {
      return Error{ErrorCode::kInvalidArgument,
                   "the constrained output (JSON schema or regex) needs at least " +
                       std::to_string(needed) + " tokens for its shortest document, EOS " +
                       "included, but only " + std::to_string(budget) +
                       " can be generated (max_new_tokens " +
                       std::to_string(config.max_new_tokens) + ", " + std::to_string(room) +
                       " context positions left after the prompt); raise max_new_tokens "
                       "(maxNewTokens) or shorten the prompt"};
    }
  }

  auto max_draft = speculation_bound(config.speculative, prefill_only);
  if (!max_draft.ok()) return max_draft.error();
  if (*max_draft > 0) {
    if (auto loaded = session_->load_verify(); !loaded.ok()) return loaded.error();
  }
  // Gemma 4's assistant drafts from the target's hidden state of the latest token's position.
  std::optional<AssistantDrafter> assistant;
  if (*max_draft > 0 && config.speculative.drafter == Drafter::kAssistant) {
    assistant.emplace(*session_);
  }
  // Prompt lookup learns, over this generation, how often its copies are kept.
  PromptLookupDrafter lookup(config.speculative.ngram_min, config.speculative.ngram_max,
                             config.speculative.adaptive_draft_length);

  Stats stats;
  stats.prompt_tokens = static_cast<int64_t>(to_feed.size());

  // Chunked prefill: every backend, steps of max_chunk, positions appended to the cache; one
  // chunk ends at the checkpoint kCheckpointMargin tokens before the end, where rings exist.
  LogitsView& logits = logits_;
  const bool rings = checkpoints_enabled_ && session_->ring_state_bytes() > 0 &&
                     static_cast<int64_t>(to_feed.size()) >= kCheckpointMargin;
  const size_t checkpoint_at = to_feed.size() - static_cast<size_t>(kCheckpointMargin);
  for (size_t offset = 0; offset < to_feed.size();) {
    if (interrupted_.load(std::memory_order_relaxed)) {
      // What was fed stays cached and consistent; the unfed rest of the input is dropped.
      pending_.clear();
      stats.prompt_tokens = static_cast<int64_t>(offset);
      stats.prefill_ms = ms_since(start);
      stats.cache_tokens = position();
      stats.stop_reason = StopReason::kInterrupted;
      return stats;
    }
    if (rings && offset == checkpoint_at) save_checkpoint();
    auto count = std::min<int64_t>(contract.max_chunk, to_feed.size() - offset);
    if (rings && offset < checkpoint_at) {
      count = std::min<int64_t>(count, static_cast<int64_t>(checkpoint_at - offset));
    }
    const float* embeds = chunk_embeds(feed_rows, offset, static_cast<size_t>(count));
    auto out = session_->forward(to_feed.data() + offset, count, position(), embeds);
    if (!out.ok()) return out.error();
    logits = *out;
    cached_.insert(cached_.end(), to_feed.begin() + offset, to_feed.begin() + offset + count);
    cached_keys_.insert(cached_keys_.end(), feed_keys.begin() + offset,
                        feed_keys.begin() + offset + count);
    high_water_ = std::max(high_water_, position());
    offset += count;
  }
  pending_.clear();
  stats.prefill_ms = ms_since(start);
  stats.cache_tokens = position();
  if (prefill_only) return stats;
  if (assistant) assistant->keep(0);

  // The budget is bounded by the positions left after the prefill (never by max_chunk). Every
  // generated token but the last is fed back, so the last one still has a position to go to
  // when the next turn feeds it.
  const int64_t room = contract.max_context - position();
  const int64_t budget = token_budget(config, room);
  Sampler sampler(config.sampling, contract.vocab_size);
  auto is_eos = [&](int64_t id) {
    return std::find(contract.eos_ids.begin(), contract.eos_ids.end(), id) != contract.eos_ids.end();
  };

  Clock::time_point first_token_at;
  stats.stop_reason = config.max_new_tokens > 0 && config.max_new_tokens <= room
                          ? StopReason::kMaxNewTokens
                          : StopReason::kContextFull;
  // Samples the next token from `row` under the constraint, and hands it to the sink. Returns
  // false when generation ends with this token (EOS, stop string, interrupt, budget).
  auto next_token = [&](float* row, int64_t& token) -> Result<bool> {
    const int64_t n = stats.generated_tokens;
    const auto sample_start = Clock::now();
    const TokenMask* allowed = nullptr;
    if (config.constraint != nullptr) {
      auto mask = config.constraint->allowed(budget - n);
      if (!mask.ok()) return mask.error();
      if (static_cast<int64_t>((*mask)->words.size()) * 64 < contract.vocab_size) {
        return Error{ErrorCode::kInvalidArgument,
                     "the token constraint covers fewer ids than the model's vocabulary (" +
                         std::to_string(contract.vocab_size) + ")"};
      }
      allowed = *mask;
    }
    token = sampler.sample(row, cached_, allowed);
    if (config.constraint != nullptr) {
      if (auto accepted = config.constraint->accept(token); !accepted.ok()) {
        return accepted.error();
      }
    }
    stats.sampling_ms += ms_since(sample_start);
    ++stats.generated_tokens;
    if (n == 0) {
      first_token_at = Clock::now();
      stats.ttft_ms = ms_since(start);
    }
    pending_.assign(1, token);  // in the conversation, not yet in the cache
    const bool keep_going = sink(token);
    if (config.stop_on_eos && is_eos(token)) {
      stats.stop_reason = StopReason::kEos;
      return false;
    }
    if (!keep_going) {
      stats.stop_reason = StopReason::kStopString;
      return false;
    }
    if (interrupted_.load(std::memory_order_relaxed)) {
      stats.stop_reason = StopReason::kInterrupted;
      return false;
    }
    return n + 1 < budget;
  };

  // Each round feeds the latest token, with the drafts that continue it when there are any
  // (verify: one row of logits per position), then samples from the rows in order while the
  // sample equals the draft the row scored. The first disagreeing sample (or the row after the
  // last draft) is the round's own token. Rejected drafts stay in the cache past position(),
  // where the positions mask them (flat caches) or they hold slots the window no longer reads
  // (rings keep max_chunk - 1 spare slots, and a verify call is at most max_chunk tokens);
  // the next call writes over them.
  int64_t token = 0;
  auto going = next_token(logits.data, token);
  if (!going.ok()) return going.error();
  std::vector<int64_t> fed;
  while (*going) {
    fed.assign(1, token);
    if (*max_draft > 0) {
      const int64_t left = budget - stats.generated_tokens - 1;
      const auto limit = static_cast<int32_t>(std::min<int64_t>(*max_draft, left));
      if (limit > 0 && assistant) {
        auto draft = assistant->draft(token, position(), limit);
        if (!draft.ok()) return draft.error();
        fed.insert(fed.end(), draft->begin(), draft->end());
      } else if (limit > 0) {
        // What the model has seen, then the token to feed: the context the drafts continue.
        cached_.push_back(token);
        const auto draft = lookup.draft(cached_, limit);
        fed.insert(fed.end(), draft.begin(), draft.end());
        cached_.pop_back();
      }
    }
    const auto count = static_cast<int64_t>(fed.size());
    auto out = count == 1 ? session_->forward(fed.data(), 1, position())
                          : session_->verify(fed.data(), count, position());
    if (!out.ok()) return out.error();
    logits = *out;
    ++stats.decode_forwards;
    stats.drafted_tokens += count - 1;
    high_water_ = std::max(high_water_, position() + count);
    cached_.push_back(token);
    cached_keys_.push_back(0);
    pending_.clear();
    int64_t kept = 0;
    for (int64_t i = 0; i < count; ++i) {
      going = next_token(logits.row(i), token);
      if (!going.ok()) return going.error();
      const bool accepted = i + 1 < count && token == fed[static_cast<size_t>(i + 1)];
      kept += accepted ? 1 : 0;
      if (!accepted || !*going) {
        // Row i's position predicted the next round's token.
        if (assistant) assistant->keep(i);
        break;
      }
      // The draft is the target's own token: it is in the cache already, at its position.
      cached_.push_back(token);
      cached_keys_.push_back(0);
      pending_.clear();
    }
    stats.accepted_tokens += kept;
    if (count > 1 && !assistant) lookup.record(count - 1, kept);
  }
  stats.decode_ms = stats.generated_tokens > 0 ? ms_since(first_token_at) : 0.0;
  stats.cache_tokens = position();
  return stats;
}

}  // namespace rne::runner

#include "rne/grammar/json_constraint.h"

#include <algorithm>

namespace rne::grammar {

size_t JsonSchemaConstraint::FrameHash::operator()(const JsonFrame& f) const {
  uint64_t h = f.node;
  for (uint64_t part : {uint64_t{f.kind}, uint64_t{f.sub}, uint64_t{f.depth}, uint64_t{f.pos},
                        uint64_t{f.count},
                        uint64_t{f.current}, f.candidates}) {
    h = (h ^ part) * 0x100000001B3ull + (h >> 29);
  }
  return static_cast<size_t>(h);
}

JsonSchemaConstraint::JsonSchemaConstraint(std::shared_ptr<const JsonSchema> schema,
                                           std::shared_ptr<const TokenTrie> trie,
                                           std::vector<int64_t> eos_ids)
    : schema_(std::move(schema)),
      trie_(std::move(trie)),
      grammar_(*schema_),
      eos_ids_(std::move(eos_ids)),
      stack_(grammar_.start()) {
  eos_ids_.erase(std::remove_if(eos_ids_.begin(), eos_ids_.end(),
                                [&](int64_t id) { return id < 0 || id >= trie_->vocab_size(); }),
                 eos_ids_.end());
  states_.resize(static_cast<size_t>(trie_->max_depth()) + 1);
  path_.resize(static_cast<size_t>(trie_->max_depth()) + 1);
}

void JsonSchemaConstraint::reset() {
  stack_ = grammar_.start();
  finished_ = false;
}

int64_t JsonSchemaConstraint::min_tokens() const {
  if (finished_) return 0;
  return static_cast<int64_t>(grammar_.minimal_completion_size(stack_)) + 1;
}

void JsonSchemaConstraint::walk(const JsonStack& start, uint32_t root, TokenMask& out,
                                Walk* cached, int64_t max_completion) {
  const auto& nodes = trie_->nodes();
  const uint16_t base = nodes[root].depth;
  const auto start_completion =
      cached ? static_cast<int64_t>(grammar_.minimal_completion_size(start)) : 0;
  states_[0] = start;
  for (uint32_t i = root + 1; i < nodes[root].end;) {
    const auto& node = nodes[i];
    const size_t d = node.depth - base;
    JsonStack& state = states_[d];
    state = states_[d - 1];
    path_[d] = static_cast<char>(node.byte);
    const auto fed = grammar_.feed(state, node.byte, cached != nullptr);
    if (fed == JsonGrammar::Feed::kRejected) {
      i = node.end;  // no token below this prefix can come here
      continue;
    }
    if (fed == JsonGrammar::Feed::kLeft) {
      cached->dependents.push_back({i, path_.substr(1, d)});
      i = node.end;
      continue;
    }
    const int32_t* first = trie_->token_ids_begin(i);
    const int32_t* last = trie_->token_ids_end(i);
    if (first != last) {
      const auto completion = static_cast<int64_t>(grammar_.minimal_completion_size(state));
      if (cached != nullptr) {
        const auto change = static_cast<int32_t>(completion - start_completion);
        if (change != 0) {
          for (const int32_t* id = first; id != last; ++id) cached->resizing.push_back({*id, change});
          cached->max_growth = std::max(cached->max_growth, change);
        }
      }
      if (cached != nullptr || completion <= max_completion) {
        for (const int32_t* id = first; id != last; ++id) out.allow(*id);
      }
    }
    ++i;
  }
}

const JsonSchemaConstraint::Walk& JsonSchemaConstraint::walk_for(const JsonFrame& top) {
  const JsonFrame key = grammar_.cache_key(top, trie_->max_depth());
  auto found = cache_.find(key);
  if (found != cache_.end()) return found->second;
  if (cache_.size() >= kMaxCachedWalks) cache_.clear();
  Walk entry;
  entry.allowed.resize(trie_->vocab_size());
  walk(JsonGrammar::only(key), 0, entry.allowed, &entry, INT64_MAX);
  return cache_.emplace(key, std::move(entry)).first->second;
}

Result<const TokenMask*> JsonSchemaConstraint::allowed(int64_t remaining) {
  mask_.resize(trie_->vocab_size());
  if (!finished_ && !JsonGrammar::closed(stack_)) {
    // After this token remaining - 1 are left, one of them for EOS: the completion the token
    // leaves may be at most remaining - 2 bytes. slack < 0: no token to spare, only tokens that
    // shorten the completion (its prefixes among them) may come.
    const auto needed = static_cast<int64_t>(grammar_.minimal_completion_size(stack_));
    const int64_t max_completion = remaining - 2;
    const int64_t slack = max_completion - needed;
    const Walk& cached = walk_for(stack_.back());
    mask_within_budget(cached.allowed, cached.resizing, cached.max_growth, slack, mask_);
    const auto& nodes = trie_->nodes();
    for (const Dependent& dependent : cached.dependents) {
      if (max_completion < 0) break;  // only EOS fits
      // Replay the prefix on the whole stack, then walk what lies below it.
      JsonStack state = stack_;
      if (!grammar_.accepts_prefix(state, dependent.prefix)) continue;
      if (static_cast<int64_t>(grammar_.minimal_completion_size(state)) <= max_completion) {
        for (const int32_t* id = trie_->token_ids_begin(dependent.node);
             id != trie_->token_ids_end(dependent.node); ++id) {
          mask_.allow(*id);
        }
      }
      if (nodes[dependent.node].end > dependent.node + 1) {
        walk(state, dependent.node, mask_, nullptr, max_completion);
      }
    }
  }
  // EOS ends the document, so it comes exactly when that is complete, even where its token
  // also has bytes the walks allowed (a byte-level EOS such as '#').
  if (!finished_) {
    const bool done = complete();
    for (int64_t id : eos_ids_) done ? mask_.allow(id) : mask_.disallow(id);
  }
  if (mask_.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 finished_ ? "the JSON document is finished (EOS was generated); nothing may follow"
                           : "no token of the vocabulary can continue the JSON document here; "
                             "the model's vocabulary cannot write what the schema requires"};
  }
  return &mask_;
}

Result<void> JsonSchemaConstraint::accept(int64_t token) {
  if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) {
    if (!complete()) {
      return Error{ErrorCode::kInvalidArgument,
                   "EOS token " + std::to_string(token) +
                       " came before the JSON document was complete"};
    }
    finished_ = true;
    return {};
  }
  const bool known = token >= 0 && token < trie_->vocab_size();
  JsonStack next = stack_;
  if (finished_ || !known || trie_->bytes(token).empty() ||
      !grammar_.accepts_prefix(next, trie_->bytes(token))) {
    return Error{ErrorCode::kInvalidArgument,
                 "token " + std::to_string(token) + " does not continue the JSON document " +
                     "the schema allows (it was not in the allowed mask)"};
  }
  stack_ = std::move(next);
  return {};
}

}  // namespace rne::grammar

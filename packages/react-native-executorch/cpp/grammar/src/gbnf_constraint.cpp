#include "rne/grammar/gbnf_constraint.h"

#include <algorithm>

namespace rne::grammar {

Result<std::unique_ptr<GbnfConstraint>> GbnfConstraint::create(
    std::shared_ptr<const GbnfGrammar> grammar, std::shared_ptr<const TokenTrie> trie,
    std::vector<int64_t> eos_ids, size_t max_states, size_t max_frames) {
  std::unique_ptr<GbnfConstraint> constraint(new GbnfConstraint(
      std::move(grammar), std::move(trie), std::move(eos_ids), max_states, max_frames));
  auto start = constraint->matcher_.start();
  if (!start.ok()) return start.error();
  constraint->start_ = constraint->current_ = constraint->intern(std::move(*start));
  return constraint;
}

GbnfConstraint::GbnfConstraint(std::shared_ptr<const GbnfGrammar> grammar,
                               std::shared_ptr<const TokenTrie> trie, std::vector<int64_t> eos_ids,
                               size_t max_states, size_t max_frames)
    : trie_(std::move(trie)),
      matcher_(std::move(grammar)),
      eos_ids_(std::move(eos_ids)),
      max_states_(max_states),
      max_frames_(max_frames) {
  eos_ids_.erase(std::remove_if(eos_ids_.begin(), eos_ids_.end(),
                                [&](int64_t id) { return id < 0 || id >= trie_->vocab_size(); }),
                 eos_ids_.end());
  path_.resize(static_cast<size_t>(trie_->max_depth()) + 1);
}

uint32_t GbnfConstraint::intern(GbnfState state) {
  matcher_.key(state, key_);
  auto found = node_ids_.find(key_);
  if (found != node_ids_.end()) return found->second;
  const auto id = static_cast<uint32_t>(nodes_.size());
  const uint64_t completion = matcher_.completion(state);
  nodes_.push_back({std::move(state), completion, {}});
  node_ids_.emplace(key_, id);
  return id;
}

uint32_t GbnfConstraint::next(uint32_t node, uint8_t byte) {
  std::vector<uint32_t>& row = nodes_[node].next;
  if (row.empty()) row.assign(256, kUnknown);
  if (row[byte] != kUnknown) return row[byte];
  const size_t mark = matcher_.mark();
  GbnfState out;
  const auto step = matcher_.step(nodes_[node].state, byte, out);
  uint32_t target = step == GbnfMatcher::Step::kRejected ? kDead : kAmbiguous;
  if (step == GbnfMatcher::Step::kOk) {
    const size_t before = nodes_.size();
    target = intern(std::move(out));
    if (nodes_.size() == before) matcher_.release(mark);  // a known state: its frames exist
  } else {
    matcher_.release(mark);
  }
  nodes_[node].next[byte] = target;  // nodes_ may have grown: index again
  return target;
}

void GbnfConstraint::drop_automaton() {
  GbnfState current = std::move(nodes_[current_].state);
  nodes_.clear();
  node_ids_.clear();
  walks_.clear();
  matcher_.compact(current);  // frees every frame but the current state's
  start_ = kNone;             // reset() makes it again
  current_ = intern(std::move(current));
  ++drops_;
}

void GbnfConstraint::reset() {
  if (start_ == kNone) start_ = intern(std::move(matcher_.start()).value());  // create() made it once
  current_ = start_;
  finished_ = false;
}

bool GbnfConstraint::complete() const {
  return finished_ || GbnfMatcher::complete(nodes_[current_].state);
}

int64_t GbnfConstraint::min_tokens() const {
  if (finished_) return 0;
  return static_cast<int64_t>(nodes_[current_].completion) + 1;
}

Result<const GbnfConstraint::Walk*> GbnfConstraint::walk_for(uint32_t node) {
  auto found = walks_.find(node);
  if (found != walks_.end()) return &found->second;
  if (walks_.size() >= kMaxCachedWalks) walks_.clear();
  Walk entry;
  entry.allowed.resize(trie_->vocab_size());
  const auto base = static_cast<int64_t>(nodes_[node].completion);
  const auto& trie_nodes = trie_->nodes();
  path_[0] = node;
  bool ambiguous = false;
  for (uint32_t i = 1; i < trie_nodes[0].end;) {
    const auto& trie_node = trie_nodes[i];
    const size_t d = trie_node.depth;
    const uint32_t target = next(path_[d - 1], trie_node.byte);
    if (target == kDead || target == kAmbiguous) {
      ambiguous = ambiguous || target == kAmbiguous;
      i = trie_node.end;  // no token below this prefix can come here
      continue;
    }
    path_[d] = target;
    const int32_t* first = trie_->token_ids_begin(i);
    const int32_t* last = trie_->token_ids_end(i);
    if (first != last) {
      const int64_t change = static_cast<int64_t>(nodes_[target].completion) - base;
      for (const int32_t* id = first; id != last; ++id) {
        entry.allowed.allow(*id);
        if (change != 0) entry.resizing.push_back({*id, change});
      }
      entry.max_growth = std::max(entry.max_growth, change);
    }
    ++i;
  }
  // A token whose bytes only an ambiguous parse reads is left out; if nothing else is left,
  // that is the error.
  if (ambiguous && entry.allowed.empty()) return GbnfMatcher::too_ambiguous();
  return &walks_.emplace(node, std::move(entry)).first->second;
}

Result<const TokenMask*> GbnfConstraint::allowed(int64_t remaining) {
  mask_.resize(trie_->vocab_size());
  if (!finished_) {
    if (nodes_.size() > max_states_ || matcher_.mark() > max_frames_) drop_automaton();
    // After this token remaining - 1 are left, one of them for EOS: the completion it leaves
    // may be at most remaining - 2 bytes. slack < 0: only tokens that shorten it may come.
    const auto needed = static_cast<int64_t>(nodes_[current_].completion);
    const int64_t slack = remaining - 2 - needed;
    auto walk = walk_for(current_);
    if (!walk.ok()) return walk.error();
    const Walk& cached = **walk;
    mask_within_budget(cached.allowed, cached.resizing, cached.max_growth, slack, mask_);
    const bool done = complete();
    for (int64_t id : eos_ids_) done ? mask_.allow(id) : mask_.disallow(id);
  }
  if (mask_.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 finished_ ? "the grammar's sentence is finished (EOS was generated); nothing "
                             "may follow"
                           : "no token of the vocabulary can continue the grammar's sentence "
                             "within the tokens left; raise the token budget or check that "
                             "the vocabulary can write what the grammar requires"};
  }
  return &mask_;
}

Result<void> GbnfConstraint::accept(int64_t token) {
  if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) {
    if (!complete()) {
      return Error{ErrorCode::kInvalidArgument,
                   "EOS token " + std::to_string(token) +
                       " came before the text was a whole sentence of the grammar"};
    }
    finished_ = true;
    return {};
  }
  const bool known = token >= 0 && token < trie_->vocab_size() && !trie_->bytes(token).empty();
  uint32_t node = finished_ || !known ? kDead : current_;
  if (node != kDead) {
    for (char c : trie_->bytes(token)) {
      node = next(node, static_cast<uint8_t>(c));
      if (node == kAmbiguous) return GbnfMatcher::too_ambiguous();
      if (node == kDead) break;
    }
  }
  if (node == kDead) {
    return Error{ErrorCode::kInvalidArgument,
                 "token " + std::to_string(token) +
                     " does not continue a sentence of the grammar (it was not in the allowed "
                     "mask)"};
  }
  current_ = node;
  return {};
}

}  // namespace rne::grammar

// GBNF-constrained generation (gbnf.h): a TokenConstraint whose allowed tokens keep the text a
// prefix of a sentence of the grammar's root, and that allows EOS only once the text is a whole
// sentence.
//
// Budget, as JsonSchemaConstraint (json_constraint.h) keeps it: each rule's shortest expansion
// is known in bytes, so the shortest completion of every parse stack is too. A token is allowed
// only if the shortest completion it leaves fits in the tokens left after it (one token per
// byte, one kept for EOS), so the sentence always finishes within the budget.
//
// The mask is a walk of the token trie, pruned at the first byte no parse accepts. The matcher's
// states are interned as they are met and their byte transitions remembered (a lazily built
// automaton), so a walk through a recurring state (a string body, a repetition) is mostly table
// lookups. Whole walks are cached per state too: a state met again costs a copy of its mask.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "rne/grammar/gbnf.h"
#include "rne/grammar/token_constraint.h"
#include "rne/grammar/token_trie.h"

namespace rne::grammar {

class GbnfConstraint final : public TokenConstraint {
 public:
  // Past max_states interned states or max_frames parse frames the automaton is dropped
  // (keeping the current state) and rebuilt as needed.
  static constexpr size_t kMaxStates = size_t{1} << 13;  // each up to 1 KiB of transitions
  static constexpr size_t kMaxFrames = size_t{1} << 20;

  // eos_ids: allowed exactly when the text is a sentence. Ids beyond the trie are ignored.
  // An error when the grammar's root alone is too ambiguous (kMaxGbnfStacks).
  static Result<std::unique_ptr<GbnfConstraint>> create(std::shared_ptr<const GbnfGrammar> grammar,
                                                        std::shared_ptr<const TokenTrie> trie,
                                                        std::vector<int64_t> eos_ids,
                                                        size_t max_states = kMaxStates,
                                                        size_t max_frames = kMaxFrames);

  int64_t min_tokens() const override;
  Result<const TokenMask*> allowed(int64_t remaining) override;
  Result<void> accept(int64_t token) override;

  // Starts a new text; the automaton and cached walks stay (they depend on the grammar and the
  // vocabulary only).
  void reset();
  bool complete() const;
  size_t cached_walks() const { return walks_.size(); }

  static constexpr size_t kMaxCachedWalks = 128;
  size_t automaton_drops() const { return drops_; }

 private:
  GbnfConstraint(std::shared_ptr<const GbnfGrammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::vector<int64_t> eos_ids, size_t max_states, size_t max_frames);
  static constexpr uint32_t kDead = UINT32_MAX;           // no parse reads the byte
  static constexpr uint32_t kAmbiguous = UINT32_MAX - 1;  // too many parses would
  static constexpr uint32_t kUnknown = UINT32_MAX - 2;  // not stepped yet
  static constexpr uint32_t kNone = UINT32_MAX;

  struct Node {
    GbnfState state;
    uint64_t completion;         // bytes
    std::vector<uint32_t> next;  // per byte: a node, kDead, kAmbiguous or kUnknown (empty: all)
  };
  struct Resizing {
    int32_t token;
    int64_t change;  // bytes the shortest completion grows by after it
  };
  struct Walk {
    TokenMask allowed;  // every token that keeps a parse alive, whatever the budget
    std::vector<Resizing> resizing;
    int64_t max_growth = 0;
  };

  uint32_t intern(GbnfState state);
  uint32_t next(uint32_t node, uint8_t byte);  // a node, kDead or kAmbiguous
  void drop_automaton();
  Result<const Walk*> walk_for(uint32_t node);

  std::shared_ptr<const TokenTrie> trie_;
  GbnfMatcher matcher_;
  std::vector<int64_t> eos_ids_;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, uint32_t> node_ids_;  // by GbnfMatcher::key
  uint32_t start_ = kNone;
  uint32_t current_ = kNone;
  bool finished_ = false;
  TokenMask mask_;
  std::unordered_map<uint32_t, Walk> walks_;  // by node
  std::string key_;
  std::vector<uint32_t> path_;
  size_t max_states_;
  size_t max_frames_;
  size_t drops_ = 0;  // the node at each trie depth of a walk
};

}  // namespace rne::grammar

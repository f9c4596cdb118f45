// JSON-Schema-constrained generation: a TokenConstraint whose allowed tokens are exactly those
// that keep the text a prefix of a document the schema's grammar accepts (json_grammar.h), and
// that allows EOS only once the document is complete. So whatever the sampler picks, the
// output parses and validates (unless max_new_tokens cuts it short).
//
// The mask for a state is computed by walking the token trie with the automaton. Most of it
// depends only on the innermost open value (the stack's top frame): tokens that end inside that
// value are allowed or not whatever lies below it. Those walks are cached per top frame, so
// e.g. every string body shares one walk of the whole vocabulary. Tokens that finish the top
// value (a closing quote, `},`) depend on the frames below; they are few, and each step
// re-walks only their subtrees from the full stack.
//
//   auto schema = compile_json_schema(text);            // once per schema
//   auto trie = TokenTrie::build(bytes_of_each_token);  // once per tokenizer
//   JsonSchemaConstraint constraint(*schema, trie, eos_ids);
//   ... generator.generate(tokens, config, sink, &constraint);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "rne/runner/json_grammar.h"
#include "rne/runner/json_schema.h"
#include "rne/runner/token_constraint.h"
#include "rne/runner/token_trie.h"

namespace rne::runner {

class JsonSchemaConstraint final : public TokenConstraint {
 public:
  // eos_ids: allowed exactly when the document is complete. Ids at or beyond the trie's
  // vocabulary are ignored.
  JsonSchemaConstraint(std::shared_ptr<const JsonSchema> schema,
                       std::shared_ptr<const TokenTrie> trie, std::vector<int64_t> eos_ids);

  Result<const TokenMask*> allowed() override;
  Result<void> accept(int64_t token) override;

  // Starts a new document. The cached walks stay (they depend on the schema and the
  // vocabulary only), so a second generation with the same schema is faster.
  void reset();
  // The text accepted so far is a complete document.
  bool complete() const { return finished_ || grammar_.complete(stack_); }
  const JsonSchema& schema() const { return *schema_; }
  size_t cached_walks() const { return cache_.size(); }

  // Maximum number of cached per-frame walks (each holds vocab_size / 8 bytes) before the cache
  // is cleared.
  static constexpr size_t kMaxCachedWalks = 256;

 private:
  struct Dependent {
    uint32_t node;       // trie node where the top frame finished
    std::string prefix;  // the bytes from the root to that node
  };
  struct Walk {
    TokenMask allowed;               // tokens that stay inside the top frame
    std::vector<Dependent> dependents;
  };
  struct FrameHash {
    size_t operator()(const JsonFrame& f) const;
  };

  const Walk& walk_for(const JsonFrame& top);
  // Walks the subtree of trie node `root` from `start`: allows the tokens the state accepts.
  // With dependents != nullptr the walk is open at the bottom and records where it left.
  void walk(const JsonStack& start, uint32_t root, TokenMask& out,
            std::vector<Dependent>* dependents);

  std::shared_ptr<const JsonSchema> schema_;
  std::shared_ptr<const TokenTrie> trie_;
  JsonGrammar grammar_;
  std::vector<int64_t> eos_ids_;
  JsonStack stack_;
  bool finished_ = false;  // EOS accepted
  TokenMask mask_;
  std::unordered_map<JsonFrame, Walk, FrameHash> cache_;
  // Reused walk buffers: the state and the byte at each depth of the trie.
  std::vector<JsonStack> states_;
  std::string path_;
};

}  // namespace rne::runner

// JSON-Schema-constrained generation: a TokenConstraint whose allowed tokens are exactly those
// that keep the text a prefix of a document the schema's grammar accepts (json_grammar.h), and
// that allows EOS only once the document is complete. So whatever the sampler picks, the
// output parses and validates.
//
// Budget: the document also always closes within the tokens the generator may still sample.
// The grammar's minimal completion (JsonGrammar::minimal_completion) takes at most one token per
// byte, plus EOS. A token is allowed only if the completion it leaves still fits in the tokens
// left after it (one kept for EOS). Once the budget equals what the completion needs, that
// leaves only tokens that shorten the completion: its prefixes (each consumes >= 1 byte of it;
// the vocabulary holds every single byte as a token in byte-level and byte-fallback
// tokenizers) and equally short alternatives (another digit, enum value of the same length),
// then EOS. A model that runs long (e.g. repeats text inside a string) so gets its string cut
// and the document closed with the shortest valid rest (required properties with minimal
// values).
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

#include "rne/grammar/json_grammar.h"
#include "rne/grammar/json_schema.h"
#include "rne/grammar/token_constraint.h"
#include "rne/grammar/token_trie.h"

namespace rne::grammar {

class JsonSchemaConstraint final : public TokenConstraint {
 public:
  // eos_ids: allowed exactly when the document is complete. Ids at or beyond the trie's
  // vocabulary are ignored.
  JsonSchemaConstraint(std::shared_ptr<const JsonSchema> schema,
                       std::shared_ptr<const TokenTrie> trie, std::vector<int64_t> eos_ids);

  // |minimal completion of the current state| + 1 (EOS): an upper bound on the tokens needed
  // when the vocabulary holds each byte of it as a token (byte-level and byte-fallback
  // vocabularies do; otherwise allowed() reports that the vocabulary cannot finish).
  int64_t min_tokens() const override;
  Result<const TokenMask*> allowed(int64_t remaining) override;
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
  // A token after which the minimal completion is longer or shorter than before it.
  struct Resizing {
    int32_t token;
    int32_t change;  // bytes
  };
  struct Walk {
    TokenMask allowed;               // tokens that stay inside the top frame
    std::vector<Dependent> dependents;
    std::vector<Resizing> resizing;  // of `allowed`, those that change the completion's size
    int32_t max_growth = 0;
  };
  struct FrameHash {
    size_t operator()(const JsonFrame& f) const;
  };

  const Walk& walk_for(const JsonFrame& top);
  // Walks the subtree of trie node `root` from `start`: allows the tokens the state accepts
  // and after which the minimal completion is at most `max_completion` bytes. With `cached`
  // the walk is open at the bottom (max_completion is not applied): it records where it left
  // and which tokens change the completion's size.
  void walk(const JsonStack& start, uint32_t root, TokenMask& out, Walk* cached,
            int64_t max_completion);

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

}  // namespace rne::grammar

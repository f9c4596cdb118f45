// A prefix tree over the byte strings of a vocabulary's tokens, built once per tokenizer. A
// grammar walks it with its automaton state and prunes a whole subtree at the first byte the
// state rejects, instead of walking 262144 tokens one by one.
//
// The nodes are stored flat in preorder: node i's subtree is [i, nodes[i].end), its children
// follow it directly, so a walk is a single forward pass that can jump over subtrees.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rne::tokenizer {
class Tokenizer;
}

namespace rne::grammar {

// The bytes each id in [0, vocab_size) adds to generated text, as the runner's streaming
// decoder writes them in the middle of a text (special tokens and ids the tokenizer does not
// know: empty). The input of TokenTrie::build for a model.
std::vector<std::string> token_byte_strings(const tokenizer::Tokenizer& tokenizer,
                                            int64_t vocab_size);

class TokenTrie {
 public:
  struct Node {
    uint32_t end;           // one past the last node of this node's subtree
    uint32_t tokens_begin;  // this node's token ids: token_ids()[tokens_begin, next node's)
    uint16_t depth;         // bytes from the root (the root is node 0, depth 0)
    uint8_t byte;           // the byte on the edge into this node
  };

  // token_bytes[id]: the bytes token `id` adds to the text. Ids with no bytes (special tokens,
  // EOS, padding) are left out: a grammar never allows them through the trie.
  static std::shared_ptr<const TokenTrie> build(std::vector<std::string> token_bytes);

  int64_t vocab_size() const { return static_cast<int64_t>(token_bytes_.size()); }
  const std::string& bytes(int64_t id) const { return token_bytes_[static_cast<size_t>(id)]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // Token ids of node i: [token_ids_begin(i), token_ids_begin(i + 1)).
  const int32_t* token_ids_begin(size_t i) const { return token_ids_.data() + nodes_[i].tokens_begin; }
  const int32_t* token_ids_end(size_t i) const {
    return token_ids_.data() + (i + 1 < nodes_.size() ? nodes_[i + 1].tokens_begin
                                                      : token_ids_.size());
  }
  uint16_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> token_bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  uint16_t max_depth_ = 0;
};

}  // namespace rne::grammar

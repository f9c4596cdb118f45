// Added tokens (tokenizer.json "added_tokens"): found in the text before anything else runs,
// leftmost-longest, honouring lstrip / rstrip / single_word like HF `tokenizers`.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rne/tokenizer/tokenizer.h"

namespace rne::tokenizer {

struct AddedToken {
  std::string content;
  // What id_to_token and decode see: the content, normalized when `normalized` is set (as in HF).
  std::string token;
  TokenId id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// A byte trie over token patterns for leftmost-longest matching in O(text * longest token).
class AddedTokenMatcher {
 public:
  void add(std::string_view pattern, const AddedToken* token);
  bool empty() const { return terminal_.size() <= 1; }

  struct Segment {
    size_t begin, end;
    const AddedToken* token;  // nullptr for plain text
  };
  // Splits `text` into plain-text and added-token segments covering it in order (empty
  // plain-text segments are omitted; whitespace eaten by lstrip/rstrip belongs to the token).
  void split(std::string_view text, std::vector<Segment>& out) const {
    split(text, 0, text.size(), false, out);
  }
  // The same for text[begin, end): matches and the whitespace lstrip/rstrip eat stay inside it
  // (single_word still sees the characters around it). With skip_special, a special token's
  // match is passed over as plain text, as HF does with `encode_special_tokens`.
  void split(std::string_view text, size_t begin, size_t end, bool skip_special,
             std::vector<Segment>& out) const;

 private:
  // Longest pattern starting at pos and ending by `end`: its length and token, or {0, nullptr}.
  std::pair<size_t, const AddedToken*> longest_at(std::string_view text, size_t pos,
                                                  size_t end) const;

  int32_t child(int32_t node, unsigned char byte) const;

  // The root's children in an array: most text bytes start no token, and this rejects them
  // without hashing.
  std::array<int32_t, 256> root_ = make_empty_root();
  std::unordered_map<uint64_t, int32_t> edges_;       // (node << 8 | byte) -> child, below root
  std::vector<const AddedToken*> terminal_{nullptr};  // per node; node 0 is the root

  static std::array<int32_t, 256> make_empty_root() {
    std::array<int32_t, 256> root{};
    root.fill(-1);
    return root;
  }
};

}  // namespace rne::tokenizer

#include "rne/grammar/token_trie.h"

#include <algorithm>

#include "rne/tokenizer/tokenizer.h"

namespace rne::grammar {

std::vector<std::string> token_byte_strings(const tokenizer::Tokenizer& tokenizer,
                                            int64_t vocab_size) {
  // A decoder past the start of the text: some decoders treat the first piece differently
  // (Metaspace drops its leading space), and generated JSON is never at the start of a text.
  auto primed = tokenizer.stream_decoder(/*skip_special_tokens=*/true);
  for (tokenizer::TokenId id : tokenizer.encode("a", /*add_special_tokens=*/false)) {
    primed.next(id);
  }
  std::vector<std::string> bytes(static_cast<size_t>(vocab_size));
  const auto known = static_cast<int64_t>(tokenizer.vocab_size());
  for (int64_t id = 0; id < std::min(vocab_size, known); ++id) {
    auto decoder = primed;
    bytes[static_cast<size_t>(id)] = decoder.next(static_cast<tokenizer::TokenId>(id));
  }
  return bytes;
}

std::shared_ptr<const TokenTrie> TokenTrie::build(std::vector<std::string> token_bytes) {
  auto trie = std::make_shared<TokenTrie>();
  trie->token_bytes_ = std::move(token_bytes);
  const auto& bytes = trie->token_bytes_;
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes.size(); ++id) {
    // Longer tokens cannot be walked (depth is 16-bit); no real vocabulary has one.
    if (!bytes[id].empty() && bytes[id].size() < UINT16_MAX) order.push_back(static_cast<int32_t>(id));
  }
  // Sorted byte strings list the trie in preorder: a prefix comes before its extensions.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes[a] < bytes[b] || (bytes[a] == bytes[b] && a < b);
  });

  auto& nodes = trie->nodes_;
  nodes.push_back({0, 0, 0, 0});
  std::vector<uint32_t> path = {0};  // node at each depth of the current string
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes[id];
    size_t common = 0;
    if (previous != nullptr) {
      const size_t limit = std::min(previous->size(), s.size());
      while (common < limit && (*previous)[common] == s[common]) ++common;
    }
    while (path.size() > common + 1) {  // close the subtrees this string leaves
      nodes[path.back()].end = static_cast<uint32_t>(nodes.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({0, static_cast<uint32_t>(trie->token_ids_.size()),
                       static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
    }
    trie->token_ids_.push_back(id);  // the deepest node of the path is this string's node
    trie->max_depth_ = std::max<uint16_t>(trie->max_depth_, static_cast<uint16_t>(s.size()));
    previous = &s;
  }
  for (uint32_t node : path) nodes[node].end = static_cast<uint32_t>(nodes.size());
  return trie;
}

}  // namespace rne::grammar

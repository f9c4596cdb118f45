#include "rne/runner/token_trie.h"

#include <algorithm>

namespace rne::runner {

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

}  // namespace rne::runner

#include "added_vocabulary.h"

#include "unicode.h"

namespace rne::tokenizer {

namespace {

bool is_space(uint32_t cp) {
  return unicode::classify(cp) == unicode::CharClass::kWhitespace;
}

// Start of the character that ends just before `pos` (pos > 0).
size_t previous_char(std::string_view text, size_t pos) {
  size_t p = pos - 1;
  while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80 && pos - p < 4) --p;
  return p;
}

}  // namespace

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  if (node == 0) return root_[byte];
  const auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
  return it == edges_.end() ? -1 : it->second;
}

void AddedTokenMatcher::add(std::string_view pattern, const AddedToken* token) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(terminal_.size());
      terminal_.push_back(nullptr);
      if (node == 0) root_[byte] = next;
      else edges_.emplace((static_cast<uint64_t>(node) << 8) | byte, next);
    }
    node = next;
  }
  // The first token with a given pattern wins, so later duplicates do not override it.
  if (terminal_[static_cast<size_t>(node)] == nullptr) terminal_[static_cast<size_t>(node)] = token;
}

std::pair<size_t, const AddedToken*> AddedTokenMatcher::longest_at(std::string_view text,
                                                                   size_t pos, size_t end) const {
  std::pair<size_t, const AddedToken*> best{0, nullptr};
  int32_t node = 0;
  for (size_t i = pos; i < end; ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (const AddedToken* t = terminal_[static_cast<size_t>(node)]) best = {i + 1 - pos, t};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, size_t begin, size_t end, bool skip_special,
                              std::vector<Segment>& out) const {
  size_t plain_start = begin;  // start of the pending plain-text segment
  size_t pos = begin;
  while (pos < end) {
    const auto [length, token] = longest_at(text, pos, end);
    if (token == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + length;
    pos = stop;  // matching resumes after the match even when it is rejected below
    if (skip_special && token->special) continue;
    uint32_t cp = 0;
    if (token->single_word) {
      const bool word_before =
          start > 0 && (unicode::decode_utf8(text, previous_char(text, start), cp), unicode::is_word_char(cp));
      const bool word_after = stop < text.size() && (unicode::decode_utf8(text, stop, cp), unicode::is_word_char(cp));
      if (word_before || word_after) continue;
    }
    if (token->lstrip) {
      while (start > plain_start) {
        const size_t p = previous_char(text, start);
        unicode::decode_utf8(text, p, cp);
        if (!is_space(cp)) break;
        start = p;
      }
    }
    if (token->rstrip) {
      while (stop < end) {
        const size_t n = unicode::decode_utf8(text, stop, cp);
        if (!is_space(cp)) break;
        stop += n;
      }
      pos = stop;
    }
    if (plain_start < start) out.push_back({plain_start, start, nullptr});
    out.push_back({start, stop, token});
    plain_start = stop;
  }
  if (plain_start < end) out.push_back({plain_start, end, nullptr});
}

}  // namespace rne::tokenizer

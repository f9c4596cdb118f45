#include "bpe.h"

#include <algorithm>
#include <array>
#include <queue>

#include "config.h"
#include "unicode.h"

namespace rne::tokenizer {

Result<std::unique_ptr<Bpe>> Bpe::load(const json::Value& model, const std::string& path) {
  ConfigReader r(model, path);
  const json::Value* vocab = r.object("vocab");
  const json::Value* merges = r.array("merges");
  const std::string unk = r.string_or("unk_token", "");
  const std::string prefix = r.string_or("continuing_subword_prefix", "");
  const std::string suffix = r.string_or("end_of_word_suffix", "");
  std::unique_ptr<Bpe> bpe(new Bpe());
  bpe->byte_fallback_ = r.boolean_or("byte_fallback", false);
  bpe->fuse_unk_ = r.boolean_or("fuse_unk", false);
  bpe->ignore_merges_ = r.boolean_or("ignore_merges", false);
  if (const json::Value* dropout = r.optional("dropout");
      dropout != nullptr && !(dropout->is_number() && dropout->as_number() == 0.0)) {
    return unsupported("BPE option", "dropout", r.child_path("dropout"),
                       "dropout null or 0; dropout is a training-time option");
  }
  if (!r.ok()) return r.error();
  if (!prefix.empty()) {
    return unsupported("BPE option", "continuing_subword_prefix", r.child_path("continuing_subword_prefix"), "an empty prefix");
  }
  if (!suffix.empty()) {
    return unsupported("BPE option", "end_of_word_suffix", r.child_path("end_of_word_suffix"), "an empty suffix");
  }

  // Ids first (to size tokens_), then views into the final strings.
  TokenId max_id = -1;
  for (const auto& [token, id] : vocab->as_object()) {
    if (!id.is_integer() || id.as_integer() < 0 || id.as_integer() > INT32_MAX) {
      return Error{ErrorCode::kInvalidTokenizer, "vocab entry \"" + token + "\" at " +
                                                     r.child_path("vocab") +
                                                     " must map to a non-negative integer id"};
    }
    max_id = std::max(max_id, static_cast<TokenId>(id.as_integer()));
  }
  // Tokens are stored by id, so ids must be (nearly) dense; a stray huge id would otherwise
  // allocate gigabytes.
  const size_t count = vocab->as_object().size();
  if (max_id >= 0 && static_cast<size_t>(max_id) >= 2 * count + 65536) {
    return unsupported("vocab", "sparse ids", r.child_path("vocab"),
                       "ids below twice the vocab size; max id is " + std::to_string(max_id) +
                           " for " + std::to_string(count) + " tokens");
  }
  bpe->tokens_.resize(static_cast<size_t>(max_id + 1));
  bpe->present_.assign(bpe->tokens_.size(), false);
  for (const auto& [token, id] : vocab->as_object()) {
    const auto i = static_cast<size_t>(id.as_integer());
    if (bpe->present_[i]) {
      return Error{ErrorCode::kInvalidTokenizer,
                   "vocab id " + std::to_string(i) + " is used twice at " + r.child_path("vocab")};
    }
    bpe->present_[i] = true;
    bpe->tokens_[i] = token;
  }
  bpe->size_ = vocab->as_object().size();
  bpe->vocab_.build(bpe->tokens_, bpe->present_);

  // Both merge forms first, as views into the parsed JSON.
  const json::Array& merge_list = merges->as_array();
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  pairs.reserve(merge_list.size());
  for (const json::Value& m : merge_list) {
    // Built only for error messages (there are hundreds of thousands of merges).
    auto where = [&] { return r.child_path("merges") + "[" + std::to_string(pairs.size()) + "]"; };
    if (m.is_string()) {  // "a b" (older files)
      const std::string& s = m.as_string();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return Error{ErrorCode::kInvalidTokenizer,
                     "merge \"" + s + "\" at " + where() + " must be two tokens separated by one space"};
      }
      pairs.emplace_back(std::string_view(s).substr(0, space), std::string_view(s).substr(space + 1));
    } else if (m.is_array() && m.as_array().size() == 2 && m.as_array()[0].is_string() &&
               m.as_array()[1].is_string()) {  // ["a", "b"]
      pairs.emplace_back(m.as_array()[0].as_string(), m.as_array()[1].as_string());
    } else {
      return Error{ErrorCode::kInvalidTokenizer,
                   "merge at " + where() + " must be \"a b\" or [\"a\", \"b\"]"};
    }
  }

  // Each merge needs the ids of its two tokens and of their concatenation: three lookups in
  // a table far bigger than the caches. Hashing and prefetching a batch before resolving it
  // overlaps those misses (loading is bound by them for a 262k vocab).
  bpe->merges_.reserve(pairs.size());
  constexpr size_t kBatch = 16;
  std::array<std::string, kBatch> joined;
  std::array<std::array<uint64_t, 3>, kBatch> hashes{};
  for (size_t begin = 0; begin < pairs.size(); begin += kBatch) {
    const size_t end = std::min(pairs.size(), begin + kBatch);
    for (size_t i = begin; i < end; ++i) {
      auto& [left, right] = pairs[i];
      std::string& both = joined[i - begin];
      both.assign(left);
      both += right;
      auto& h = hashes[i - begin];
      h = {TokenIndex::hash(left), TokenIndex::hash(right), TokenIndex::hash(both)};
      for (const uint64_t x : h) bpe->vocab_.prefetch(x);
    }
    for (size_t i = begin; i < end; ++i) {
      const auto& [left, right] = pairs[i];
      const auto& h = hashes[i - begin];
      const int32_t a = bpe->vocab_.find(left, h[0]);
      const int32_t b = bpe->vocab_.find(right, h[1]);
      const int32_t c = bpe->vocab_.find(joined[i - begin], h[2]);
      if (a < 0 || b < 0 || c < 0) {
        const std::string_view missing = a < 0 ? left : b < 0 ? right : joined[i - begin];
        return Error{ErrorCode::kInvalidTokenizer, "merge at " + r.child_path("merges") + "[" +
                                                       std::to_string(i) + "]: \"" +
                                                       std::string(missing) + "\" is not in the vocab"};
      }
      // A repeated pair takes its last rank, as in HF (which collects merges into a map).
      bpe->merges_.insert_or_assign(pair_key(a, b), Merge{static_cast<int32_t>(i), c});
    }
  }

  bpe->byte_tokens_.fill(-1);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const std::string name = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
    if (auto id = bpe->token_to_id(name)) bpe->byte_tokens_[b] = *id;
  }
  if (!unk.empty()) {
    auto id = bpe->token_to_id(unk);
    if (!id) {
      return Error{ErrorCode::kInvalidTokenizer,
                   "unk_token \"" + unk + "\" at " + r.child_path("unk_token") + " is not in the vocab"};
    }
    bpe->unk_id_ = *id;
  }
  return bpe;
}

std::optional<TokenId> Bpe::token_to_id(std::string_view token) const {
  const int32_t id = vocab_.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string* Bpe::id_to_token(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return nullptr;
  if (!present_[static_cast<size_t>(id)]) return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

// One symbol per character: its vocab id, else its <0xNN> byte tokens (byte_fallback), else
// unk (consecutive unknowns fused into one when fuse_unk); without unk the character is
// dropped, as in HF.
void Bpe::initial_symbols(std::string_view word, std::vector<TokenId>& symbols) const {
  bool pending_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    uint32_t cp = 0;
    const size_t n = unicode::decode_utf8(word, pos, cp);
    const std::string_view ch = word.substr(pos, n);
    pos += n;
    if (const int32_t id = vocab_.find(ch); id >= 0) {
      if (pending_unk) symbols.push_back(unk_id_);
      pending_unk = false;
      symbols.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (const char c : ch) all_bytes = all_bytes && byte_tokens_[static_cast<unsigned char>(c)] >= 0;
      if (all_bytes) {
        // Like HF, a pending unk stays pending across byte tokens.
        for (const char c : ch) symbols.push_back(byte_tokens_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk && !fuse_unk_) symbols.push_back(unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) symbols.push_back(unk_id_);
}

// Applies merges lowest rank first (leftmost on ties) with a priority queue over a linked list
// of symbols: O(n log n) per word instead of rescanning all pairs after every merge.
void Bpe::merge(std::vector<TokenId>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  struct Candidate {
    int32_t rank;
    int pos;
    TokenId result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<int> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  std::vector<bool> alive(static_cast<size_t>(n), true);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int pos, int right) {
    if (const Merge* m = merges_.find(pair_key(symbols[pos], symbols[right]))) {
      queue.push({m->rank, pos, m->result});
    }
  };
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  for (int i = 0; i + 1 < n; ++i) push(i, i + 1);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int right = next[top.pos];
    if (!alive[top.pos] || right < 0) continue;
    // Skip stale entries: the pair at pos changed since this candidate was queued.
    const Merge* current = merges_.find(pair_key(symbols[top.pos], symbols[right]));
    if (current == nullptr || current->result != top.result) continue;

    symbols[top.pos] = top.result;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    if (prev[top.pos] >= 0) push(prev[top.pos], top.pos);
    if (next[top.pos] >= 0) push(top.pos, next[top.pos]);
  }
  size_t out = 0;
  for (int i = 0; i >= 0; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

void Bpe::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const int32_t id = vocab_.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (const auto it = cache_.find(std::string(word)); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> symbols;
  symbols.reserve(word.size());
  initial_symbols(word, symbols);
  merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(word), std::move(symbols));
  }
}

}  // namespace rne::tokenizer

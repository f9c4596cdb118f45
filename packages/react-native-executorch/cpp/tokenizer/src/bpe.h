// The tokenizer.json "model" of type BPE: vocab, merges (both file forms), byte fallback to
// <0xNN> tokens, unk handling, and a per-word cache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flat_index.h"
#include "rne/json/json.h"
#include "rne/tokenizer/result.h"
#include "rne/tokenizer/tokenizer.h"

namespace rne::tokenizer {

class Bpe {
 public:
  static Result<std::unique_ptr<Bpe>> load(const json::Value& model, const std::string& path);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  // nullptr when the id is not in the vocab.
  const std::string* id_to_token(TokenId id) const;
  size_t size() const { return size_; }

 private:
  Bpe() = default;
  struct Merge {
    int32_t rank = 0;
    TokenId result = -1;
  };
  static uint64_t pair_key(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void initial_symbols(std::string_view word, std::vector<TokenId>& symbols) const;
  void merge(std::vector<TokenId>& symbols) const;

  // Token strings by id; ids may have gaps (present_ false). vocab_ indexes into tokens_,
  // which never changes after loading.
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
  size_t size_ = 0;
  TokenIndex vocab_;
  PairIndex<Merge> merges_;
  std::array<TokenId, 256> byte_tokens_{};  // <0xNN> ids, -1 when absent
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  TokenId unk_id_ = -1;

  // Words up to kMaxCachedWordBytes are cached; the cache is dropped when it grows too big.
  static constexpr size_t kMaxCachedWordBytes = 256;
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache_;
};

}  // namespace rne::tokenizer

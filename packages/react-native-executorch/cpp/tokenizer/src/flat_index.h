// Open-addressing hash tables for the BPE hot paths (token -> id, id pair -> merge). Flat
// arrays with linear probing touch one or two cache lines per lookup where std::unordered_map
// chases a node pointer and a key pointer: loading a 262k-token vocab is several times faster.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace rne::tokenizer {

inline size_t table_capacity(size_t entries) {
  size_t capacity = 16;
  while (capacity < entries * 2) capacity <<= 1;  // load factor <= 0.5
  return capacity;
}

// token string -> id, over strings owned elsewhere (the id-indexed token table).
class TokenIndex {
 public:
  // Indexes tokens[id] for every id with present[id]; `tokens` must outlive the index and
  // not change.
  void build(const std::vector<std::string>& tokens, const std::vector<bool>& present) {
    tokens_ = &tokens;
    size_t count = 0;
    for (const bool p : present) count += p;
    slots_.assign(table_capacity(count), Slot{0, -1});
    mask_ = slots_.size() - 1;
    for (size_t id = 0; id < tokens.size(); ++id) {
      if (!present[id]) continue;
      const uint64_t h = hash(tokens[id]);
      size_t i = h & mask_;
      while (slots_[i].id >= 0) i = (i + 1) & mask_;
      slots_[i] = Slot{static_cast<uint32_t>(h >> 32), static_cast<int32_t>(id)};
    }
  }

  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }

  // Starts loading the slot a lookup of a token with hash `h` reads first, so a batch of
  // lookups overlaps its cache misses.
  void prefetch(uint64_t h) const {
#if defined(__GNUC__) || defined(__clang__)
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
#else
    (void)h;
#endif
  }

  // The id of `token`, or -1.
  int32_t find(std::string_view token) const { return find(token, hash(token)); }
  // Same, with the token's hash() already computed.
  int32_t find(std::string_view token, uint64_t h) const {
    if (slots_.empty()) return -1;
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && (*tokens_)[static_cast<size_t>(s.id)] == token) return s.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag;  // high hash bits: most mismatches are rejected without touching the string
    int32_t id;    // -1 = empty
  };
  const std::vector<std::string>* tokens_ = nullptr;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// 64-bit key -> value, for (left id, right id) -> merge. Keys are never ~0.
template <typename V>
class PairIndex {
 public:
  void reserve(size_t entries) {
    keys_.assign(table_capacity(entries), kEmpty);
    values_.assign(keys_.size(), V{});
    mask_ = keys_.size() - 1;
  }

  // Inserts or overwrites. reserve() must have been called for at least the final count.
  void insert_or_assign(uint64_t key, const V& value) {
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == kEmpty || keys_[i] == key) {
        keys_[i] = key;
        values_[i] = value;
        return;
      }
    }
  }

  const V* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t mix(uint64_t x) {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }

  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  size_t mask_ = 0;
};

}  // namespace rne::tokenizer

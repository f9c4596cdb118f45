// GPT-2 byte-level pieces: the byte <-> printable-character map and the pre-tokenizer split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rne::tokenizer::byte_level {

// The regex HF `tokenizers` uses for ByteLevel(use_regex=true); a Split pre-tokenizer with
// exactly this pattern is served by split_gpt2() too.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Appends the byte-level form of `bytes` (each byte mapped to its printable stand-in, UTF-8).
void encode_bytes(std::string_view bytes, std::string& out);

// Inverse of encode_bytes for one token. Returns false (out untouched) when a character of
// `token` is not a byte stand-in (e.g. an added token containing a plain space).
bool decode_token(std::string_view token, std::string& out);

// Splits `text` like the GPT-2 regex above (Isolated behaviour): byte ranges [begin, end)
// covering the whole text, in order. Hand-written matcher over the generated Unicode tables.
void split_gpt2(std::string_view text, std::vector<std::pair<size_t, size_t>>& out);

}  // namespace rne::tokenizer::byte_level

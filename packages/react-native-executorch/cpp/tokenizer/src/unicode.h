// UTF-8 and the few Unicode properties the pre-tokenizers need, without ICU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rne/json/json.h"

namespace rne::tokenizer::unicode {

enum class CharClass : uint8_t { kOther, kLetter, kNumber, kWhitespace };

// \p{L}, \p{N}, \s (White_Space) or other, from generated tables (unicode_tables.inc, Unicode
// 16.0 like HF `tokenizers` 0.23).
CharClass classify(uint32_t cp);

// \w: Alphabetic, marks, decimal numbers, connector punctuation, join controls.
bool is_word_char(uint32_t cp);

// Decodes the character starting at `pos` (which must be < s.size()). Returns its length in
// bytes. An invalid or truncated sequence decodes as one byte with cp = 0xFFFD, so callers
// always make progress.
size_t decode_utf8(std::string_view s, size_t pos, uint32_t& cp);

// The one UTF-8 encoder of the core lives with the JSON reader (\u escapes need it).
using rne::json::append_utf8;

// Length of the valid UTF-8 sequence at `pos`, or 0 when the bytes there are not one.
size_t valid_sequence_length(std::string_view s, size_t pos);

// True when `s` is entirely valid UTF-8.
bool is_valid_utf8(std::string_view s);

// Replaces every invalid sequence by U+FFFD the way Rust's String::from_utf8_lossy does (one
// replacement per maximal invalid prefix), so decode() output matches HF `tokenizers`.
std::string to_valid_utf8_lossy(std::string_view s);

}  // namespace rne::tokenizer::unicode

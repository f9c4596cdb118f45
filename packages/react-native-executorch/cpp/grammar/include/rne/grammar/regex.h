// Regular expressions compiled to a DFA over UTF-8 bytes, for constrained generation (JSON
// Schema `pattern`/`format`, whole answers constrained by a regex).
//
// The syntax is a subset of ECMA-262 (what JSON Schema's `pattern` uses), no flags:
// - literals, escapes \t \n \v \f \r \0 \xHH \uHHHH \u{H...} and \ before any punctuation;
// - `.` (any code point but \n \r U+2028 U+2029), classes [...] and [^...] with ranges, the
//   shorthands \d \D \w \W \s \S (inside classes too);
// - groups (...), (?:...), (?<name>...), alternation |, quantifiers ? * + {m} {m,} {m,n}
//   (greedy or lazy: the same strings match);
// - anchors ^ and $ (start and end of the whole string; no multiline mode).
// Lookaround, backreferences, \b \B, flags, \p{...} and \cX are refused with their offset.
//
// Generated strings match under both ECMA-262 and Python's `re` (the `jsonschema` package's
// engine): the shorthands' Unicode meanings differ between the two, so a shorthand matches only
// what it means in both (\d: ASCII digits; \D: ASCII non-digits; likewise \w \W \s \S), and a
// negated class leaves out everything a shorthand inside it could mean in either.
//
// Search (JSON Schema's `pattern`): the pattern matches anywhere in the string unless anchored.
// Whole (a regex-constrained answer): the whole text matches.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rne/grammar/result.h"

namespace rne::grammar {

// Bounds on what one compiled regex may cost; beyond one it is refused with an error that names
// the limit.
constexpr size_t kMaxRegexBytes = 4096;       // pattern text
constexpr size_t kMaxRegexNfaStates = 50000;  // after expanding {m,n} and classes
constexpr size_t kMaxRegexStates = 16384;     // DFA states, length bounds included
// Groups inside groups: the parser, the automaton builder and the tree's destructor recurse once
// a level, and a phone's worker thread has a small stack.
constexpr size_t kMaxRegexNesting = 100;

// A deterministic automaton over bytes. It accepts only valid UTF-8 (no surrogates or
// overlong forms) and every state can still reach an accepting one.
struct RegexDfa {
  static constexpr uint16_t kDead = 0xFFFF;
  uint16_t start = 0;
  uint16_t classes = 0;                   // byte classes: bytes no transition tells apart
  std::array<uint8_t, 256> byte_class{};  // byte -> class
  std::vector<uint16_t> next;             // state * classes + class -> state or kDead
  std::vector<uint8_t> accepting;         // per state

  size_t size() const { return accepting.size(); }
  uint16_t step(uint16_t state, uint8_t byte) const {
    return next[size_t{state} * classes + byte_class[byte]];
  }
  bool matches(const std::string& text) const;  // the whole text
};

// Compiles the intersection of `patterns` (every one must match; none given: any string) with a
// length of [min_length, max_length] code points, less the strings any of `excluded` matches
// (JSON Schema's not: {pattern}). search: each pattern matches anywhere unless anchored (JSON
// Schema); otherwise the whole text. An excluded pattern is read in its widest meaning, so that
// no engine matches what is kept: a shorthand or negated class as under either ECMA-262 or
// Python, `.` as anything but \n (Python's), `$` also before a final \n (Python's).
// kInvalidArgument errors quote the pattern and the offset of what is unsupported.
Result<RegexDfa> compile_regex(const std::vector<std::string>& patterns, bool search,
                               uint32_t min_length = 0, uint32_t max_length = UINT32_MAX,
                               const std::vector<std::string>& excluded = {});

// Shortest accepted continuations. byte_cost[b]: output bytes that writing b takes (0: b cannot
// be written). Per state: the fewest output bytes to an accepting state (kNone: none), and the
// first byte of that path (ties: the lowest byte), so following first_byte from any state
// spells its shortest continuation, and each state along it has the rest as its own.
struct RegexPaths {
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> cost;
  std::vector<uint8_t> first_byte;
};
RegexPaths shortest_paths(const RegexDfa& dfa, const std::array<uint8_t, 256>& byte_cost);

// The strings `dfa` accepts that do not contain the two bytes `first` `second` in a row (the
// Gemma 4 syntax's string content may not contain "<|"). kInvalidArgument when none is left or
// the automaton grows past kMaxRegexStates.
Result<RegexDfa> without_pair(const RegexDfa& dfa, uint8_t first, uint8_t second);

}  // namespace rne::grammar

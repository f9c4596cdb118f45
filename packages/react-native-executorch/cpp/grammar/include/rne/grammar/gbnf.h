// GBNF grammars (the format llama.cpp and llama.rn take) compiled for constrained generation,
// and the matcher that reads UTF-8 bytes against one.
//
// Syntax:
// - rules `name ::= alternatives`, names of letters, digits, '-' and '_'; `root` is the start
//   rule; a rule may span lines inside ( ) and after `::=` or `|`;
// - alternatives `a | b`, sequences `a b`, grouping `( ... )`, the empty string `""`;
// - literals "..." and classes [a-z] / [^...] with the escapes \n \r \t \\ \" \] \[ \- \/
//   \xHH \uHHHH \UHHHHHHHH; `.` is any character;
// - repetition `* + ?`, `{m}`, `{m,}`, `{m,n}`, `{,n}` on any element (a whole literal, a class,
//   a rule, a group);
// - comments from `#` to the end of the line.
// Refused with the line and column: syntax errors, undefined or twice-defined rules, left
// recursion (a rule that can reach itself before reading a character: a top-down matcher would
// loop; write it right-recursive or with `*`), rules that generate no string, grammars past the
// size limits below, and an empty grammar (no rule at all: "grammar has no 'root' rule").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rne/grammar/result.h"

namespace rne::grammar {

constexpr size_t kMaxGbnfBytes = 64 * 1024;    // grammar text
constexpr size_t kMaxGbnfElements = 100000;    // after expanding repetitions
constexpr uint32_t kMaxGbnfRepeat = 1000;      // m and n of {m,n}
constexpr size_t kMaxGbnfStacks = 256;         // parse stacks alive at once (ambiguity)
// Groups inside groups. The parser recurses once per level (a few hundred bytes of stack each),
// so this keeps it far inside the 512 KiB an iOS secondary thread has, whatever the text.
constexpr size_t kMaxGbnfNesting = 100;

struct GbnfGrammar {
  enum Kind : uint8_t { kEnd, kChar, kRule };
  struct Element {
    Kind kind;
    uint32_t value;  // kChar: index into classes; kRule: rule id
  };
  using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // sorted, disjoint, no surrogates

  // Every rule's alternatives, flattened: each alternative is its elements then kEnd.
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: where each alternative starts
  std::vector<std::string> rule_names;              // generated rules: "name/N"
  std::vector<Ranges> classes;
  std::vector<uint8_t> class_min_bytes;  // per class: UTF-8 bytes of its shortest member
  // Per element position: the fewest bytes that derive it and the rest of its alternative.
  std::vector<uint32_t> rest;
  uint32_t root = 0;
};

// kInvalidArgument errors read "grammar line L, column C: what".
Result<std::shared_ptr<const GbnfGrammar>> compile_gbnf(const std::string& text);

// The set of parse stacks after the bytes read so far. A stack is a linked list of frames in
// the matcher's arena (top first); frame 0 is the empty stack (root is complete).
struct GbnfState {
  std::vector<uint32_t> stacks;
  uint32_t bits = 0;  // the current code point's bits so far
  uint8_t pending = 0;  // its continuation bytes still to come
  uint8_t length = 0;   // its UTF-8 length
};

class GbnfMatcher {
 public:
  enum class Step { kOk, kRejected, kTooAmbiguous };

  explicit GbnfMatcher(std::shared_ptr<const GbnfGrammar> grammar);

  const GbnfGrammar& grammar() const { return *grammar_; }
  // The state before any byte; an error when root alone is too ambiguous.
  Result<GbnfState> start();
  // The error for Step::kTooAmbiguous.
  static Error too_ambiguous();
  // out = in after `byte`. kRejected: no sentence has the bytes so far as a prefix.
  Step step(const GbnfState& in, uint8_t byte, GbnfState& out);
  // The whole text so far is a sentence of root.
  static bool complete(const GbnfState& state);
  // The fewest bytes that finish a sentence from `state` (0 when complete).
  uint64_t completion(const GbnfState& state) const;
  // The state's stacks as positions (for cache keys); equal states give equal keys.
  void key(const GbnfState& state, std::string& out) const;

  // Frames made after mark() can be dropped with release(mark) once no state uses them.
  size_t mark() const { return frames_.size(); }
  void release(size_t mark) { frames_.resize(mark); }
  // Drops every frame `state` does not use (renumbering its stacks).
  void compact(GbnfState& state);

  // A whole text against the grammar (tests, tools).
  Result<bool> matches(const std::string& text);

 private:
  struct Frame {
    uint32_t pos;     // the element this frame reads next (never kEnd)
    uint32_t parent;  // the frame below
    uint64_t cost;    // fewest bytes to finish this frame and all below it
  };
  uint32_t push(uint32_t pos, uint32_t parent);
  bool same(uint32_t a, uint32_t b) const;
  bool add(std::vector<uint32_t>& out, uint32_t stack);
  // Pushes onto `out` every normalized stack (top on a kChar, or empty) that reading from
  // element `pos` over `parent` can give. false: too many stacks. Iterative (a chain of rules
  // that read no character first can be thousands long): its work list is `pending_`.
  bool expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out);

  std::shared_ptr<const GbnfGrammar> grammar_;
  std::vector<Frame> frames_;
  std::vector<std::pair<uint32_t, uint32_t>> pending_;  // expand's (pos, parent) still to do
};

}  // namespace rne::grammar

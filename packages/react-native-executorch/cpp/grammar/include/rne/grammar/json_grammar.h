// A byte-level pushdown automaton that accepts exactly the JSON texts a compiled JsonSchema
// generates (see json_schema.h for the shape of that JSON), or with JsonSyntax::kGemma4 the same
// values in Gemma 4's tool-call syntax. The state is a stack of small
// frames, one per open value; feeding a byte changes the top frame, pushes a child value or
// pops finished ones. It is deterministic: at most one way to read each byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rne/grammar/json_schema.h"

namespace rne::grammar {

// One open value. Plain data, compared and hashed field by field (the mask cache's key).
struct JsonFrame {
  uint32_t node = 0;   // schema node (0 for strings and numbers without length or range
                       // bounds: they do not depend on it)
  // kind and sub share a byte so the frame stays 24 bytes (walks copy stacks per trie node).
  uint8_t kind : 4;    // JsonGrammar::Kind
  uint8_t sub : 4;     // position inside the value, per kind
  uint8_t depth = 0;   // values, objects, arrays: the frame's index in the whole stack (nesting
                       // is bounded); 0 for the others, which push nothing
  uint16_t pos = 0;    // bytes matched of a literal/key, digits of a number part, hex digits
  uint32_t count = 0;  // object: next property that may come; array: items so far; number: 1 =
                       // integer; string: the byte range the next UTF-8 continuation needs
  uint32_t current = 0;  // object: the property whose value is open; bounded string: code
                         // points so far; bounded integer: 1 when negative
  uint64_t candidates = 0;  // literal values or object keys still matching; bounded integer:
                            // the magnitude so far; string with a pattern: its automaton state

  JsonFrame() : kind(0), sub(0) {}

  bool operator==(const JsonFrame& o) const {
    return node == o.node && kind == o.kind && sub == o.sub && depth == o.depth &&
           pos == o.pos && count == o.count && current == o.current &&
           candidates == o.candidates;
  }
};

using JsonStack = std::vector<JsonFrame>;

class JsonGrammar {
 public:
  // kText: a whole answer constrained by a regex (JsonSchema::whole_text), never finished.
  enum Kind : uint8_t { kValue, kString, kNumber, kLiteral, kObject, kArray, kText };

  // What feeding one byte did.
  enum class Feed : uint8_t {
    kRejected,  // the byte cannot come here
    kAccepted,  // consumed
    kLeft,      // (open_bottom only) the bottom frame finished: what follows depends on the
                // frames below it, which this stack does not hold
  };

  explicit JsonGrammar(const JsonSchema& schema);

  // The stack before the first byte: one value of the root schema.
  JsonStack start() const;
  // A stack holding only `frame`, for walks that stop where the frame finishes (open_bottom).
  static JsonStack only(const JsonFrame& frame) { return {frame}; }

  // Feeds one byte. With open_bottom, finishing the bottom frame returns kLeft instead of
  // completing the document. Nothing changes on kRejected only if the caller keeps a copy (the
  // stack may be partly updated).
  Feed feed(JsonStack& stack, uint8_t byte, bool open_bottom = false) const;
  // True when the bytes fed so far are a complete document (nothing more is needed).
  bool complete(const JsonStack& stack) const;
  // True when no byte can follow (the document is complete and closed).
  static bool closed(const JsonStack& stack) { return stack.empty(); }

  // Convenience for tests and tools: feeds all of `text` to a copy of `stack`.
  bool accepts_prefix(JsonStack& stack, std::string_view text) const;
  bool matches(std::string_view text) const;  // a whole document

  // The shortest bytes that make the document complete from `stack` (empty when it is complete
  // already): an open escape, \u sequence or UTF-8 character finished and the string closed, a
  // number or literal/enum/const/key finished, the remaining required properties of open objects
  // and minItems of open arrays written with their shortest values, brackets closed. Feeding it
  // to `stack` always makes complete() true. Ties go to the first candidate (lowest enum or
  // property index), so after feeding a prefix of it, the completion is the rest of it.
  std::string minimal_completion(const JsonStack& stack) const;
  // minimal_completion(stack).size(), without building the string (per token of a mask walk).
  size_t minimal_completion_size(const JsonStack& stack) const;
  // The shortest value `node` accepts (the compiler refuses schemas where one has none).
  const std::string& minimal_value(uint32_t node) const { return schema_.nodes[node].minimal; }

  // A frame that accepts the same byte strings of up to `horizon` bytes as `frame`, with the
  // same changes of the minimal completion's size: bounded strings far from both bounds share
  // one, so the mask cache keeps one walk for them, not one per length.
  JsonFrame cache_key(const JsonFrame& frame, size_t horizon) const;

  static constexpr size_t kMaxDepth = 64;  // nesting beyond this is refused
  static constexpr uint16_t kMaxIntegerDigits = 15;
  static constexpr uint16_t kMaxFractionDigits = 15;
  static constexpr uint16_t kMaxExponentDigits = 3;

 private:
  Feed feed_value(JsonStack& stack, uint8_t c) const;
  Feed feed_string(JsonStack& stack, uint8_t c, bool open_bottom) const;
  Feed feed_pattern_string(JsonStack& stack, uint8_t c, bool open_bottom) const;
  // Gemma 4's syntax (JsonSyntax::kGemma4): <|"|>-delimited raw strings.
  Feed feed_gemma_string(JsonStack& stack, uint8_t c, bool open_bottom) const;
  Feed gemma_content(JsonFrame& frame, uint8_t c) const;
  bool gemma_may_close(const JsonFrame& frame) const;
  Feed feed_text(JsonStack& stack, uint8_t c) const;
  int cheapest_escape(const StringPattern& pattern, uint16_t state, uint32_t length) const;
  const StringPattern& pattern_of(const SchemaNode& node) const {
    return schema_.patterns[node.pattern - 1];
  }
  Feed feed_number(JsonStack& stack, uint8_t c, bool open_bottom, bool& reprocess) const;
  Feed feed_literal(JsonStack& stack, uint8_t c, bool open_bottom, bool& reprocess) const;
  Feed feed_object(JsonStack& stack, uint8_t c, bool open_bottom) const;
  Feed feed_array(JsonStack& stack, uint8_t c, bool open_bottom) const;
  // A container's states after a member: `done`, then `done + 1` after its ',' and `done + 2`
  // after the writer's space. ',' is taken when `more()` members may come, `close` when
  // `may_close()`; nullopt where c starts the next member (the caller reads it). The two are
  // asked only of the byte they decide: most bytes are neither.
  template <class More, class MayClose>
  std::optional<Feed> feed_separator(JsonStack& stack, uint8_t c, bool open_bottom, uint8_t done,
                                     char close, More more, MayClose may_close) const;
  // Pops the finished top frame and tells its parent; kLeft when it was the open bottom.
  Feed finish(JsonStack& stack, bool open_bottom) const;
  bool push_value(JsonStack& stack, uint32_t node) const;
  uint64_t eligible_keys(const SchemaNode& node, uint32_t from) const;
  bool literal_complete(const JsonFrame& frame) const;
  // Bounded integers: whether digits can still extend the frame's number into the range, and
  // the fewest digits (appended to `out` when given) that do.
  bool integer_feasible(const SchemaNode& node, bool negative, uint64_t magnitude,
                        uint16_t digits) const;
  template <class Out>
  void complete_integer(const JsonFrame& frame, Out& out) const;
  bool in_range(const JsonFrame& frame) const;
  // Appends (or counts, per Out) the bytes that finish `frame`; `top`: no child value is open
  // above it.
  template <class Out>
  void complete_frame(const JsonFrame& frame, bool top, Out& out) const;
  template <class Out>
  void complete_pattern_string(const JsonFrame& frame, Out& out) const;
  template <class Out>
  void complete_gemma_string(const JsonFrame& frame, Out& out) const;
  template <class Out>
  void complete_object(const JsonFrame& frame, bool top, Out& out) const;
  template <class Out>
  void complete_array(const JsonFrame& frame, bool top, Out& out) const;
  // `,"key":value` for each required property from index `from` on (no comma before the first
  // when `first`), then '}'.
  template <class Out>
  void close_object(const SchemaNode& node, uint32_t from, bool first, Out& out) const;
  // Of the properties in `keys` (bits), the one whose key (from byte `pos`), value and the
  // object's rest are shortest.
  // keys: bit k is property from + k (see eligible_keys).
  uint32_t shortest_key_choice(const SchemaNode& node, uint64_t keys, uint32_t from,
                               uint16_t pos) const;

  const JsonSchema& schema_;
  const bool gemma_;                    // JsonSyntax::kGemma4
  const uint8_t quote_;                 // the first byte of a string
  const std::string_view key_separator_;  // what follows a key literal (Gemma 4's holds its ':')
};

}  // namespace rne::grammar

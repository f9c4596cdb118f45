#include "rne/grammar/json_grammar.h"

#include <type_traits>

#include "rne/base/utf8.h"

namespace rne::grammar {

namespace {

using Feed = JsonGrammar::Feed;

// kStrLt, kStrClose: Gemma 4's strings only (a '<' that may start the closing <|"|>, and that
// delimiter after its "<|"; pos counts its bytes, as it does the opening one's in kStrOpen).
enum StringSub : uint8_t { kStrOpen, kStrBody, kStrEscape, kStrHex, kStrUtf8, kStrLt, kStrClose };

constexpr std::string_view kGemmaQuote = "<|\"|>";
enum NumberSub : uint8_t {
  kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumExp, kNumExpSign, kNumExpDigits
};
enum ObjectSub : uint8_t {
  kObjOpen, kObjFirst, kObjKey, kObjColon, kObjAfterColon, kObjAfterColonSpace, kObjValueDone,
  kObjAfterComma, kObjAfterCommaSpace
};
enum ArraySub : uint8_t {
  kArrOpen, kArrFirst, kArrValueDone, kArrAfterComma, kArrAfterCommaSpace
};
// feed_separator's layout of the states after a member.
static_assert(kObjAfterComma == kObjValueDone + 1 && kObjAfterCommaSpace == kObjValueDone + 2);
static_assert(kArrAfterComma == kArrValueDone + 1 && kArrAfterCommaSpace == kArrValueDone + 2);

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

uint32_t byte_range(uint8_t lo, uint8_t hi) { return (uint32_t{lo} << 8) | hi; }

// A UTF-8 lead byte: how many continuation bytes follow and the range of the first one
// (rne/base/utf8.h). 0: not a lead.
int utf8_lead(uint8_t c, uint32_t& first_range) {
  const size_t length = base::utf8::sequence_length(c);
  if (length < 2) return 0;
  const base::utf8::ByteRange range = base::utf8::second_byte_range(c);
  first_range = byte_range(range.lo, range.hi);
  return static_cast<int>(length - 1);
}

// The frame moves to `next` having taken the byte.
Feed advance(JsonFrame& f, uint8_t next) {
  f.sub = next;
  return Feed::kAccepted;
}

// A byte that must be `want`, then the frame moves to `next`.
Feed expect(JsonFrame& f, uint8_t c, char want, uint8_t next) {
  return c == static_cast<uint8_t>(want) ? advance(f, next) : Feed::kRejected;
}

// The one space the JSON writer puts after ':' and ',' (Gemma 4's syntax has none): taken by
// moving to `next`.
bool took_space(JsonFrame& f, uint8_t c, bool gemma, uint8_t next) {
  if (c != ' ' || gemma) return false;
  f.sub = next;
  return true;
}

// A string byte >= 0x80 outside a sequence: a lead byte opens kStrUtf8 with its continuation
// count and the first continuation's range; anything else is refused.
Feed start_utf8(JsonFrame& f, uint8_t c) {
  uint32_t range;
  const int continuation = utf8_lead(c, range);
  if (continuation == 0) return Feed::kRejected;
  f.sub = kStrUtf8;
  f.pos = static_cast<uint16_t>(continuation);
  f.count = range;
  return Feed::kAccepted;
}

// A continuation byte in kStrUtf8, within the range the sequence allows; the last one returns
// the frame to the string's body.
Feed continue_utf8(JsonFrame& f, uint8_t c) {
  if (c < (f.count >> 8) || c > (f.count & 0xFF)) return Feed::kRejected;
  f.count = byte_range(0x80, 0xBF);
  if (--f.pos == 0) {
    f.sub = kStrBody;
    f.count = 0;
  }
  return Feed::kAccepted;
}

// One content byte through a string's automaton (its state in `candidates`): refused where no
// accepting state stays reachable or the counted maxLength would be passed (json_schema.h).
Feed pattern_byte(const StringPattern& p, JsonFrame& f, uint8_t c) {
  const uint16_t next = p.dfa.step(static_cast<uint16_t>(f.candidates), c);
  if (next == RegexDfa::kDead || p.paths.cost[next] == RegexPaths::kNone) return Feed::kRejected;
  if (p.max_length != UINT32_MAX) {
    const uint32_t n = f.current + ((c & 0xC0) != 0x80 ? 1 : 0);
    if (uint64_t{n} + p.path_length[next] > p.max_length) return Feed::kRejected;
    f.current = n;
  }
  f.candidates = next;
  return Feed::kAccepted;
}

bool number_accepting(uint8_t sub) {
  return sub == kNumZero || sub == kNumInt || sub == kNumFrac || sub == kNumExpDigits;
}

int lowest_bit(uint64_t bits) { return __builtin_ctzll(bits); }

// The character a JSON escape letter stands for (\u excluded); -1 for others.
int unescaped(uint8_t e) {
  switch (e) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return -1;
  }
}

// A character as the JSON string writes it.
template <class Out>
void add_escaped(uint8_t c, Out& out) {
  switch (c) {
    case '"': out.add("\\\""); return;
    case '\\': out.add("\\\\"); return;
    case '\b': out.add("\\b"); return;
    case '\f': out.add("\\f"); return;
    case '\n': out.add("\\n"); return;
    case '\r': out.add("\\r"); return;
    case '\t': out.add("\\t"); return;
    default: out.add(static_cast<char>(c)); return;
  }
}

// Whether a value of `node` (not a union) can start with byte c (`quote`: what opens a string).
bool starts_with(const SchemaNode& node, uint8_t c, uint8_t quote) {
  if (!node.literals.empty()) {
    for (const std::string& literal : node.literals) {
      if (static_cast<uint8_t>(literal[0]) == c) return true;
    }
    return false;
  }
  if (c == quote) return (node.types & kJsonString) != 0;
  switch (c) {
    case 't': case 'f': return (node.types & kJsonBoolean) != 0;
    case 'n': return (node.types & kJsonNull) != 0;
    case '{': return (node.types & kJsonObject) != 0;
    case '[': return (node.types & kJsonArray) != 0;
    default: return (c == '-' || is_digit(c)) && (node.types & (kJsonNumber | kJsonInteger));
  }
}

// The least multiple of `step` (>= 1) that is >= x.
int64_t multiple_at_least(int64_t x, int64_t step) {
  const int64_t r = ((x % step) + step) % step;
  return r == 0 ? x : x + (step - r);
}

uint64_t power10(int n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}


// An object or array that accepted a byte by opening a value frame: the byte is that value's.
bool pushed_value(const JsonStack& stack, Feed result) {
  return result == Feed::kAccepted && !stack.empty() && stack.back().kind == JsonGrammar::kValue;
}

// The rest of an open UTF-8 sequence (kStrUtf8): the lowest allowed byte, then the lowest
// continuations.
template <class Out>
void complete_utf8(const JsonFrame& f, Out& out) {
  out.add(static_cast<char>(f.count >> 8));
  for (uint16_t p = 1; p < f.pos; ++p) out.add('\x80');
}

// Output sinks for the completion walk: one builds the bytes, the other only counts them.
struct AppendBytes {
  std::string& text;
  void add(std::string_view bytes) { text += bytes; }
  void add(char byte) { text += byte; }
};
struct CountBytes {
  size_t size = 0;
  void add(std::string_view bytes) { size += bytes.size(); }
  void add(char) { ++size; }
};

}  // namespace

JsonGrammar::JsonGrammar(const JsonSchema& schema)
    : schema_(schema),
      gemma_(schema.syntax == JsonSyntax::kGemma4),
      quote_(gemma_ ? '<' : '"'),
      key_separator_(gemma_ ? "" : ":") {}

JsonStack JsonGrammar::start() const {
  JsonFrame root;
  root.node = schema_.root;
  root.kind = schema_.whole_text ? kText : kValue;
  if (schema_.whole_text) root.candidates = pattern_of(schema_.nodes[root.node]).dfa.start;
  return {root};
}

bool JsonGrammar::push_value(JsonStack& stack, uint32_t node) const {
  // Room for the value's shortest form, so the minimal completion can always be written.
  const uint32_t depth = stack.back().depth + 1u;
  if (depth + schema_.nodes[node].minimal_depth > kMaxDepth) return false;
  JsonFrame frame;
  frame.node = node;
  frame.kind = kValue;
  frame.depth = static_cast<uint8_t>(depth);
  stack.push_back(frame);
  return true;
}

Feed JsonGrammar::finish(JsonStack& stack, bool open_bottom) const {
  stack.pop_back();
  if (stack.empty()) return open_bottom ? Feed::kLeft : Feed::kAccepted;
  JsonFrame& parent = stack.back();
  if (parent.kind == kObject) {
    parent.sub = kObjValueDone;
  } else {  // kArray: the only other kind that holds values
    ++parent.count;
    parent.sub = kArrValueDone;
  }
  return Feed::kAccepted;
}

uint64_t JsonGrammar::eligible_keys(const SchemaNode& node, uint32_t from) const {
  // Properties come in schema order; optional ones may be skipped, a required one may not. Bit
  // k is property from + k: the compiler keeps at most 63 optional ones before a required one,
  // so the window reaches it (any number of properties in all).
  uint64_t bits = 0;
  for (uint32_t i = from; i < node.properties.size() && i - from < 64; ++i) {
    bits |= uint64_t{1} << (i - from);
    if (node.properties[i].required) break;
  }
  return bits;
}

bool JsonGrammar::literal_complete(const JsonFrame& frame) const {
  const auto& literals = schema_.nodes[frame.node].literals;
  for (uint64_t bits = frame.candidates; bits != 0; bits &= bits - 1) {
    if (literals[lowest_bit(bits)].size() == frame.pos) return true;
  }
  return false;
}

bool JsonGrammar::complete(const JsonStack& stack) const {
  if (stack.empty()) return true;
  if (stack.size() > 1) return false;
  const JsonFrame& top = stack.back();
  if (top.kind == kNumber) return number_accepting(top.sub) && in_range(top);
  if (top.kind == kLiteral) return literal_complete(top);
  if (top.kind == kText) {
    return pattern_of(schema_.nodes[top.node]).dfa.accepting[static_cast<uint16_t>(top.candidates)];
  }
  return false;
}

// A regex-constrained answer: every byte is the automaton's (it keeps UTF-8 valid), and the
// text may go on after an accepting state (EOS decides).
Feed JsonGrammar::feed_text(JsonStack& stack, uint8_t c) const {
  JsonFrame& f = stack.back();
  const StringPattern& p = pattern_of(schema_.nodes[f.node]);
  const uint16_t next = p.dfa.step(static_cast<uint16_t>(f.candidates), c);
  if (next == RegexDfa::kDead || p.paths.cost[next] == RegexPaths::kNone) return Feed::kRejected;
  f.candidates = next;
  return Feed::kAccepted;
}

// Turns a value frame into the frame of the type its first byte starts; the byte is then fed to
// that frame.
Feed JsonGrammar::feed_value(JsonStack& stack, uint8_t c) const {
  JsonFrame& f = stack.back();
  // A union: the alternative whose values start with this byte (they are disjoint).
  for (const SchemaNode* union_node = &schema_.nodes[f.node];
       !union_node->alternatives.empty();) {
    const uint32_t* chosen = nullptr;
    for (const uint32_t& alt : union_node->alternatives) {
      if (starts_with(schema_.nodes[alt], c, quote_)) {
        chosen = &alt;
        break;
      }
    }
    if (chosen == nullptr) return Feed::kRejected;
    f.node = *chosen;
    union_node = &schema_.nodes[f.node];
  }
  const SchemaNode& node = schema_.nodes[f.node];
  JsonFrame next;
  if (!node.literals.empty()) {
    next.node = f.node;
    next.kind = kLiteral;
    next.candidates = node.literals.size() == 64 ? ~uint64_t{0}
                                                 : (uint64_t{1} << node.literals.size()) - 1;
  } else if (c == quote_ && (node.types & kJsonString)) {
    next.kind = kString;
    if (node.bounded_string()) next.node = f.node;
    if (node.pattern != 0) next.candidates = pattern_of(node).dfa.start;
  } else if ((c == '-' || is_digit(c)) && (node.types & (kJsonNumber | kJsonInteger))) {
    next.kind = kNumber;
    next.count = (node.types & kJsonNumber) && !node.integer_range ? 0 : 1;
    if (node.integer_range) next.node = f.node;
  } else if ((c == 't' || c == 'f') && (node.types & kJsonBoolean)) {
    next.kind = kLiteral;
    next.node = schema_.boolean_node;
    next.candidates = 0b11;
  } else if (c == 'n' && (node.types & kJsonNull)) {
    next.kind = kLiteral;
    next.node = schema_.null_node;
    next.candidates = 0b1;
  } else if (c == '{' && (node.types & kJsonObject) &&
             f.depth + node.object_depth <= kMaxDepth) {
    next.kind = kObject;
    next.node = f.node;
    next.depth = f.depth;
  } else if (c == '[' && (node.types & kJsonArray) && f.depth + node.array_depth <= kMaxDepth) {
    next.kind = kArray;
    next.node = f.node;
    next.depth = f.depth;
  } else {
    return Feed::kRejected;
  }
  f = next;
  return Feed::kAccepted;
}

Feed JsonGrammar::feed_string(JsonStack& stack, uint8_t c, bool open_bottom) const {
  if (gemma_) return feed_gemma_string(stack, c, open_bottom);
  JsonFrame& f = stack.back();
  if (f.node != 0 && f.sub != kStrOpen && schema_.nodes[f.node].pattern != 0) {
    return feed_pattern_string(stack, c, open_bottom);
  }
  switch (f.sub) {
    case kStrOpen:
      return expect(f, c, '"', kStrBody);
    case kStrBody:
      if (f.node != 0) {  // bounded length: count code points as they start
        const SchemaNode& node = schema_.nodes[f.node];
        if (c == '"') {
          if (f.current < node.min_length) return Feed::kRejected;
        } else if (f.current >= node.max_length || (c >= 0x80 && c < 0xC0)) {
          return Feed::kRejected;
        } else {
          ++f.current;
        }
      }
      if (c == '"') return finish(stack, open_bottom);
      if (c == '\\') return advance(f, kStrEscape);
      if (c >= 0x80) return start_utf8(f, c);
      if (c < 0x20) return Feed::kRejected;  // control characters must be escaped in JSON
      return Feed::kAccepted;
    case kStrEscape:
      if (c == 'u' && f.node == 0) {  // bounded strings: see json_schema.h
        f.sub = kStrHex;
        f.pos = 0;
        return Feed::kAccepted;
      }
      return unescaped(c) >= 0 ? advance(f, kStrBody) : Feed::kRejected;
    case kStrHex:
      if (!is_hex(c)) return Feed::kRejected;
      if (++f.pos == 4) {
        f.sub = kStrBody;
        f.pos = 0;
      }
      return Feed::kAccepted;
    case kStrUtf8:
      return continue_utf8(f, c);
  }
  return Feed::kRejected;
}

// Gemma 4's strings: <|"|>, raw content, <|"|>. A '<' in the content may start the closing
// delimiter, so the frame waits for the next byte (kStrLt) with the content's state before the
// '<' kept, and reads the '<' as content once that byte is not '|'.
Feed JsonGrammar::feed_gemma_string(JsonStack& stack, uint8_t c, bool open_bottom) const {
  JsonFrame& f = stack.back();
  switch (f.sub) {
    case kStrOpen:
    case kStrClose:
      if (c != static_cast<uint8_t>(kGemmaQuote[f.pos])) return Feed::kRejected;
      if (++f.pos < kGemmaQuote.size()) return Feed::kAccepted;
      if (f.sub == kStrClose) return finish(stack, open_bottom);
      f.sub = kStrBody;
      f.pos = 0;
      return Feed::kAccepted;
    case kStrLt:
      if (c == '|') {
        if (!gemma_may_close(f)) return Feed::kRejected;
        f.sub = kStrClose;
        f.pos = 2;
        return Feed::kAccepted;
      }
      f.sub = kStrBody;
      if (gemma_content(f, '<') != Feed::kAccepted) return Feed::kRejected;
      break;  // c is content (or another '<')
    case kStrUtf8:  // strings without a pattern (the automaton keeps UTF-8 valid otherwise)
      return continue_utf8(f, c);
    default:
      break;
  }
  if (c == '<') {
    JsonFrame as_content = f;
    if (!gemma_may_close(f) && gemma_content(as_content, '<') != Feed::kAccepted) {
      return Feed::kRejected;
    }
    f.sub = kStrLt;
    return Feed::kAccepted;
  }
  return gemma_content(f, c);
}

// One byte of a Gemma 4 string's content (its pattern, length bounds and UTF-8 validity).
Feed JsonGrammar::gemma_content(JsonFrame& f, uint8_t c) const {
  const SchemaNode* node = f.node != 0 ? &schema_.nodes[f.node] : nullptr;
  if (node != nullptr && node->pattern != 0) return pattern_byte(pattern_of(*node), f, c);
  if (node != nullptr) {  // bounded length: count code points as they start
    if (f.current >= node->max_length) return Feed::kRejected;
    ++f.current;
  }
  return c >= 0x80 ? start_utf8(f, c) : Feed::kAccepted;
}

bool JsonGrammar::gemma_may_close(const JsonFrame& f) const {
  if (f.node == 0) return true;
  const SchemaNode& node = schema_.nodes[f.node];
  if (node.pattern != 0) {
    return pattern_of(node).dfa.accepting[static_cast<uint16_t>(f.candidates)] != 0;
  }
  return f.current >= node.min_length;
}

// A string with a pattern/format: its automaton's state is in `candidates` and decides every
// character (escapes decoded first); the automaton also counts the length and keeps UTF-8 valid.
Feed JsonGrammar::feed_pattern_string(JsonStack& stack, uint8_t c, bool open_bottom) const {
  JsonFrame& f = stack.back();
  const StringPattern& p = pattern_of(schema_.nodes[f.node]);
  const auto state = static_cast<uint16_t>(f.candidates);
  auto to = [&](uint8_t character) {
    if (pattern_byte(p, f, character) != Feed::kAccepted) return Feed::kRejected;
    return advance(f, kStrBody);
  };
  if (f.sub == kStrEscape) {
    const int decoded = unescaped(c);
    return decoded < 0 ? Feed::kRejected : to(static_cast<uint8_t>(decoded));
  }
  if (c == '"') return p.dfa.accepting[state] ? finish(stack, open_bottom) : Feed::kRejected;
  if (c == '\\') {
    if (cheapest_escape(p, state, f.current) < 0) return Feed::kRejected;
    return advance(f, kStrEscape);
  }
  if (c < 0x20) return Feed::kRejected;  // control characters must be escaped in JSON
  return to(c);
}

// Of the escapes whose character can come in `state` (after `length` code points), the one with
// the shortest rest (ties: the lowest character); -1 when none can.
int JsonGrammar::cheapest_escape(const StringPattern& p, uint16_t state, uint32_t length) const {
  int best = -1;
  uint32_t best_cost = RegexPaths::kNone;
  for (char letter : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) {
    const int e = static_cast<uint8_t>(letter);
    const int decoded = unescaped(static_cast<uint8_t>(e));
    const uint16_t next = p.dfa.step(state, static_cast<uint8_t>(decoded));
    if (next == RegexDfa::kDead || p.paths.cost[next] == RegexPaths::kNone) continue;
    if (p.max_length != UINT32_MAX && uint64_t{length} + 1 + p.path_length[next] > p.max_length) {
      continue;  // counted maxLength: the character and its shortest rest must fit
    }
    if (best < 0 || p.paths.cost[next] < best_cost ||
        (p.paths.cost[next] == best_cost && decoded < unescaped(static_cast<uint8_t>(best)))) {
      best = e;
      best_cost = p.paths.cost[next];
    }
  }
  return best;
}

Feed JsonGrammar::feed_number(JsonStack& stack, uint8_t c, bool open_bottom,
                              bool& reprocess) const {
  JsonFrame& f = stack.back();
  const bool integer = f.count == 1;
  auto to = [&f](uint8_t sub, uint16_t pos) {
    f.sub = sub;
    f.pos = pos;
    return Feed::kAccepted;
  };
  // Bounded integers: a digit only where the range can still be reached, an end only inside it.
  const SchemaNode* bounded = f.node != 0 ? &schema_.nodes[f.node] : nullptr;
  auto digit = [&](uint8_t sub, uint16_t digits) {
    if (bounded != nullptr) {
      const uint64_t magnitude = sub == kNumZero ? 0 : f.candidates * 10 + (c - '0');
      if (!integer_feasible(*bounded, f.current == 1, magnitude, digits)) return Feed::kRejected;
      f.candidates = magnitude;
    }
    return to(sub, sub == kNumZero ? 0 : digits);
  };
  // Fraction, exponent, or the end of the number (the byte then belongs to the parent).
  auto after_digits = [&](bool fraction_allowed) {
    if (!integer && fraction_allowed && c == '.') return to(kNumDot, 0);
    if (!integer && (c == 'e' || c == 'E')) return to(kNumExp, 0);
    if (!in_range(f)) return Feed::kRejected;
    reprocess = true;
    return finish(stack, open_bottom);
  };
  switch (f.sub) {
    case kNumStart:
      if (c == '-') {
        if (bounded != nullptr) {
          if (!integer_feasible(*bounded, true, 0, 0)) return Feed::kRejected;
          f.current = 1;
        }
        return to(kNumMinus, 0);
      }
      [[fallthrough]];
    case kNumMinus:
      if (c == '0') return digit(kNumZero, 1);
      if (is_digit(c)) return digit(kNumInt, 1);
      return Feed::kRejected;
    case kNumZero:
      return after_digits(true);
    case kNumInt:
      if (is_digit(c) && f.pos < kMaxIntegerDigits) {
        const Feed fed = digit(kNumInt, f.pos + 1);
        if (fed == Feed::kAccepted || bounded == nullptr) return fed;
      }
      return after_digits(true);
    case kNumDot:
      if (is_digit(c)) return to(kNumFrac, 1);
      return Feed::kRejected;
    case kNumFrac:
      if (is_digit(c) && f.pos < kMaxFractionDigits) return to(kNumFrac, f.pos + 1);
      return after_digits(false);
    case kNumExp:
      if (c == '+' || c == '-') return to(kNumExpSign, 0);
      [[fallthrough]];
    case kNumExpSign:
      if (is_digit(c)) return to(kNumExpDigits, 1);
      return Feed::kRejected;
    case kNumExpDigits:
      if (is_digit(c) && f.pos < kMaxExponentDigits) return to(kNumExpDigits, f.pos + 1);
      reprocess = true;
      return finish(stack, open_bottom);
  }
  return Feed::kRejected;
}

bool JsonGrammar::integer_feasible(const SchemaNode& node, bool negative, uint64_t magnitude,
                                   uint16_t digits) const {
  // The values digits can still make: the magnitude itself, then each longer one it starts
  // (none after a leading 0). After a bare '-': any magnitude.
  auto meets = [&](uint64_t first, uint64_t last) {  // magnitudes [first, last]
    const auto a = static_cast<int64_t>(first);
    const auto b = static_cast<int64_t>(last);
    // The values those magnitudes make, within [minimum, maximum]: is a multiple among them?
    const int64_t low = std::max(negative ? -b : a, node.minimum);
    const int64_t high = std::min(negative ? -a : b, node.maximum);
    return low <= high && multiple_at_least(low, node.multiple_of) <= high;
  };
  if (digits == 0) return meets(0, power10(kMaxIntegerDigits) - 1);
  if (magnitude == 0) return meets(0, 0);
  for (int extra = 0; digits + extra <= kMaxIntegerDigits; ++extra) {
    const uint64_t scale = power10(extra);
    if (meets(magnitude * scale, (magnitude + 1) * scale - 1)) return true;
  }
  return false;
}

bool JsonGrammar::in_range(const JsonFrame& f) const {
  if (f.node == 0 || f.kind != kNumber) return true;
  const SchemaNode& node = schema_.nodes[f.node];
  const auto value = static_cast<int64_t>(f.candidates) * (f.current == 1 ? -1 : 1);
  return value >= node.minimum && value <= node.maximum && value % node.multiple_of == 0;
}

// The fewest digits that bring a bounded integer into its range (the range's member nearest
// zero among the numbers the digits so far start).
template <class Out>
void JsonGrammar::complete_integer(const JsonFrame& f, Out& out) const {
  const SchemaNode& node = schema_.nodes[f.node];
  const bool negative = f.current == 1;
  // Magnitudes allowed by the range: [-maximum, -minimum] when negative.
  const int64_t floor_magnitude = negative ? -node.maximum : node.minimum;
  const int64_t ceiling_magnitude = negative ? -node.minimum : node.maximum;
  if (f.sub == kNumStart || f.sub == kNumMinus) {  // no digit yet
    const int64_t magnitude =
        multiple_at_least(std::max<int64_t>(floor_magnitude, 0), node.multiple_of);
    out.add(std::to_string(magnitude));
    return;
  }
  if (in_range(f)) return;
  const uint64_t magnitude = f.candidates;
  for (int extra = 1; f.pos + extra <= kMaxIntegerDigits; ++extra) {
    const uint64_t scale = power10(extra);
    const auto first = static_cast<int64_t>(magnitude * scale);
    const auto last = static_cast<int64_t>((magnitude + 1) * scale - 1);
    // Nearest zero: the smallest magnitude in range (a multiple of multiple_of: a magnitude is
    // one exactly when its value is).
    const int64_t target = multiple_at_least(std::max(floor_magnitude, first), node.multiple_of);
    if (target <= last && target <= ceiling_magnitude) {
      const std::string text = std::to_string(target);
      out.add(std::string_view(text).substr(text.size() - extra));
      return;
    }
  }
}

JsonFrame JsonGrammar::cache_key(const JsonFrame& frame, size_t horizon) const {
  if (frame.kind != kString || frame.node == 0) return frame;
  // A '<' not yet counted (and the delimiters): kept exact, they are short-lived.
  if (gemma_ && (frame.sub == kStrLt || frame.sub == kStrOpen || frame.sub == kStrClose)) {
    return frame;
  }
  const SchemaNode& node = schema_.nodes[frame.node];
  if (node.pattern != 0) {  // far from maxLength: the unbounded pattern's state (json_schema.h)
    const StringPattern& p = pattern_of(node);
    const auto state = static_cast<uint16_t>(frame.candidates);
    if (p.max_length != UINT32_MAX) {  // counted maxLength: only the distance to it matters
      JsonFrame key = frame;
      if (uint64_t{frame.current} + p.far_margin + horizon <= p.max_length) key.current = 0;
      return key;
    }
    if (p.far_node == 0 || frame.sub == kStrOpen || p.length[state] < node.min_length ||
        uint64_t{p.length[state]} + p.far_margin + horizon > node.max_length) {
      return frame;
    }
    JsonFrame key = frame;
    key.node = p.far_node;
    key.candidates = p.base_state[state];
    return key;
  }
  const uint64_t n = frame.current;
  JsonFrame key = frame;
  // Within `horizon` bytes at most `horizon` code points come: only the distance to each bound
  // up to that matters.
  if (node.min_length >= n + horizon) {
    key.current = 0;
  } else if (n >= node.min_length && node.max_length >= n + horizon) {
    key.current = node.min_length;
  }
  return key;
}

// Literals (enum/const values, true/false/null) are matched byte by byte against the
// candidates still possible. One that is a prefix of another (only numbers: 1 and 12) ends when
// the next byte continues none of them; the byte then belongs to the parent.
Feed JsonGrammar::feed_literal(JsonStack& stack, uint8_t c, bool open_bottom,
                               bool& reprocess) const {
  JsonFrame& f = stack.back();
  const auto& literals = schema_.nodes[f.node].literals;
  uint64_t next = 0;
  bool longer_left = false;
  for (uint64_t bits = f.candidates; bits != 0; bits &= bits - 1) {
    const std::string& literal = literals[lowest_bit(bits)];
    if (literal.size() > f.pos && static_cast<uint8_t>(literal[f.pos]) == c) {
      next |= bits & (~bits + 1);
      if (literal.size() > f.pos + 1u) longer_left = true;
    }
  }
  if (next == 0) {
    if (!literal_complete(f)) return Feed::kRejected;
    reprocess = true;
    return finish(stack, open_bottom);
  }
  f.candidates = next;
  ++f.pos;
  if (!longer_left) return finish(stack, open_bottom);  // nothing can extend it: done now
  return Feed::kAccepted;
}

Feed JsonGrammar::feed_object(JsonStack& stack, uint8_t c, bool open_bottom) const {
  JsonFrame& f = stack.back();
  const SchemaNode& node = schema_.nodes[f.node];
  // A byte of a key: narrows the candidates; once one key is matched whole, its value follows.
  auto key_byte = [&]() {
    uint64_t next = 0;
    for (uint64_t bits = f.candidates; bits != 0; bits &= bits - 1) {
      const std::string& key = node.properties[f.count + lowest_bit(bits)].key;
      if (key.size() > f.pos && static_cast<uint8_t>(key[f.pos]) == c) {
        next |= bits & (~bits + 1);
      }
    }
    if (next == 0) return Feed::kRejected;
    f.candidates = next;
    ++f.pos;
    // JSON keys end with an unescaped quote, Gemma 4's with their only ':', so none is a prefix
    // of another: a match is unique.
    const uint32_t first = f.count + static_cast<uint32_t>(lowest_bit(next));
    if ((next & (next - 1)) == 0 && node.properties[first].key.size() == f.pos && node.tagged) {
      // The tag and its value are read: the object goes on as the shape they select, whose
      // first property is the tag.
      f.node = node.properties[first].node;
      f.count = 1;
      f.candidates = 0;
      f.pos = 0;
      f.sub = kObjValueDone;
      return Feed::kAccepted;
    }
    if ((next & (next - 1)) == 0 && node.properties[first].key.size() == f.pos) {
      f.current = first;
      f.count = f.current + 1;
      f.candidates = 0;
      f.pos = 0;
      f.sub = gemma_ ? kObjAfterColonSpace : kObjColon;  // Gemma 4's key holds its ':'
    }
    return Feed::kAccepted;
  };
  auto start_key = [&]() {
    if (!gemma_ && c != '"') return Feed::kRejected;
    f.candidates = eligible_keys(node, f.count);
    if (f.candidates == 0) return Feed::kRejected;
    f.sub = kObjKey;
    if (gemma_) {  // bare keys: c is the key's first byte
      f.pos = 0;
      return key_byte();
    }
    f.pos = 1;  // every JSON key literal starts with the quote
    return Feed::kAccepted;
  };
  // '}' may come unless a required property is still missing (the last eligible one).
  auto may_close = [&]() {
    if (node.tagged) return false;  // a shape must be chosen (SchemaNode::tagged)
    const uint64_t eligible = eligible_keys(node, f.count);
    return eligible == 0 || !node.properties[f.count + 63 - __builtin_clzll(eligible)].required;
  };
  switch (f.sub) {
    case kObjOpen:
      return expect(f, c, '{', kObjFirst);
    case kObjFirst:
      if (c == '}') return may_close() ? finish(stack, open_bottom) : Feed::kRejected;
      return start_key();
    case kObjKey:
      return key_byte();
    case kObjColon:
      return expect(f, c, ':', kObjAfterColon);
    case kObjAfterColon:
      if (took_space(f, c, gemma_, kObjAfterColonSpace)) return Feed::kAccepted;
      [[fallthrough]];
    case kObjAfterColonSpace: {
      const uint32_t value_node = node.properties[f.current].node;
      // The caller feeds c to the new value frame.
      return push_value(stack, value_node) ? Feed::kAccepted : Feed::kRejected;
    }
    case kObjValueDone:
    case kObjAfterComma:
    case kObjAfterCommaSpace:
      if (const auto fed = feed_separator(
              stack, c, open_bottom, kObjValueDone, '}',
              [&] { return eligible_keys(node, f.count) != 0; }, may_close)) {
        return *fed;
      }
      return start_key();
  }
  return Feed::kRejected;
}

Feed JsonGrammar::feed_array(JsonStack& stack, uint8_t c, bool open_bottom) const {
  JsonFrame& f = stack.back();
  const SchemaNode& node = schema_.nodes[f.node];
  auto start_item = [&]() {
    if (f.count >= node.max_items) return Feed::kRejected;
    // The caller feeds c to the new value frame.
    return push_value(stack, node.item(f.count)) ? Feed::kAccepted : Feed::kRejected;
  };
  switch (f.sub) {
    case kArrOpen:
      return expect(f, c, '[', kArrFirst);
    case kArrFirst:
      if (c == ']') return node.min_items == 0 ? finish(stack, open_bottom) : Feed::kRejected;
      return start_item();
    case kArrValueDone:
    case kArrAfterComma:
    case kArrAfterCommaSpace:
      if (const auto fed = feed_separator(
              stack, c, open_bottom, kArrValueDone, ']', [&] { return f.count < node.max_items; },
              [&] { return f.count >= node.min_items; })) {
        return *fed;
      }
      return start_item();
  }
  return Feed::kRejected;
}

template <class More, class MayClose>
std::optional<Feed> JsonGrammar::feed_separator(JsonStack& stack, uint8_t c, bool open_bottom,
                                                uint8_t done, char close, More more,
                                                MayClose may_close) const {
  JsonFrame& f = stack.back();
  if (f.sub == done) {
    if (c == ',' && more()) return advance(f, static_cast<uint8_t>(done + 1));
    if (c == static_cast<uint8_t>(close) && may_close()) return finish(stack, open_bottom);
    return Feed::kRejected;
  }
  if (f.sub == done + 1 && took_space(f, c, gemma_, static_cast<uint8_t>(done + 2))) return Feed::kAccepted;
  return std::nullopt;
}

Feed JsonGrammar::feed(JsonStack& stack, uint8_t c, bool open_bottom) const {
  for (;;) {
    if (stack.empty()) return Feed::kRejected;  // a closed document takes nothing more
    bool reprocess = false;
    Feed result = Feed::kRejected;
    switch (stack.back().kind) {
      case kValue:
        result = feed_value(stack, c);
        reprocess = true;  // the typed frame reads the byte
        break;
      case kString:
        result = feed_string(stack, c, open_bottom);
        break;
      case kNumber:
        result = feed_number(stack, c, open_bottom, reprocess);
        break;
      case kLiteral:
        result = feed_literal(stack, c, open_bottom, reprocess);
        break;
      case kObject:
        result = feed_object(stack, c, open_bottom);
        reprocess = pushed_value(stack, result);
        break;
      case kArray:
        result = feed_array(stack, c, open_bottom);
        reprocess = pushed_value(stack, result);
        break;
      case kText:
        result = feed_text(stack, c);
        break;
    }
    if (result != Feed::kAccepted || !reprocess) return result;
  }
}

bool JsonGrammar::accepts_prefix(JsonStack& stack, std::string_view text) const {
  for (char c : text) {
    if (feed(stack, static_cast<uint8_t>(c)) != Feed::kAccepted) return false;
  }
  return true;
}

bool JsonGrammar::matches(std::string_view text) const {
  JsonStack stack = start();
  return accepts_prefix(stack, text) && complete(stack);
}

std::string JsonGrammar::minimal_completion(const JsonStack& stack) const {
  std::string text;
  AppendBytes out{text};
  for (size_t i = stack.size(); i-- > 0;) complete_frame(stack[i], i + 1 == stack.size(), out);
  return text;
}

size_t JsonGrammar::minimal_completion_size(const JsonStack& stack) const {
  CountBytes out;
  for (size_t i = stack.size(); i-- > 0;) complete_frame(stack[i], i + 1 == stack.size(), out);
  return out.size;
}

template <class Out>
void JsonGrammar::complete_frame(const JsonFrame& f, bool top, Out& out) const {
  switch (f.kind) {
    case kValue:
      out.add(minimal_value(f.node));
      return;
    case kString:
      if (gemma_) {
        complete_gemma_string(f, out);
        return;
      }
      if (f.node != 0 && schema_.nodes[f.node].pattern != 0) {
        complete_pattern_string(f, out);
        return;
      }
      switch (f.sub) {
        case kStrOpen:
          out.add('"');
          break;
        case kStrEscape:
          out.add('n');  // any escape is one byte; a newline reads as a cut
          break;
        case kStrHex:
          for (uint16_t p = f.pos; p < 4; ++p) out.add('0');
          break;
        case kStrUtf8:
          complete_utf8(f, out);
          break;
        default:
          break;
      }
      if (f.node != 0) {  // pad to minLength (a character begun above is counted)
        for (uint32_t n = f.current; n < schema_.nodes[f.node].min_length; ++n) out.add('a');
      }
      out.add('"');
      return;
    case kNumber:
      if (f.node != 0) {
        complete_integer(f, out);
      } else if (!number_accepting(f.sub)) {
        out.add('0');  // after '-', '.', 'e' or the sign
      }
      return;
    case kLiteral: {
      if (literal_complete(f)) return;
      const auto& literals = schema_.nodes[f.node].literals;
      const std::string* shortest = nullptr;
      for (uint64_t bits = f.candidates; bits != 0; bits &= bits - 1) {
        const std::string& literal = literals[lowest_bit(bits)];
        if (shortest == nullptr || literal.size() < shortest->size()) shortest = &literal;
      }
      out.add(std::string_view(*shortest).substr(f.pos));
      return;
    }
    case kObject:
      complete_object(f, top, out);
      return;
    case kArray:
      complete_array(f, top, out);
      return;
    case kText: {
      const StringPattern& p = pattern_of(schema_.nodes[f.node]);
      auto state = static_cast<uint16_t>(f.candidates);
      if constexpr (std::is_same_v<Out, CountBytes>) {
        out.size += p.paths.cost[state];
      } else {
        for (; !p.dfa.accepting[state]; state = p.dfa.step(state, p.paths.first_byte[state])) {
          out.add(static_cast<char>(p.paths.first_byte[state]));
        }
      }
      return;
    }
  }
}

template <class Out>
void JsonGrammar::complete_gemma_string(const JsonFrame& f, Out& out) const {
  const SchemaNode* node = f.node != 0 ? &schema_.nodes[f.node] : nullptr;
  const StringPattern* p = node != nullptr && node->pattern != 0 ? &pattern_of(*node) : nullptr;
  auto state = static_cast<uint16_t>(f.candidates);
  uint32_t length = f.current;
  switch (f.sub) {
    case kStrOpen:
      out.add(kGemmaQuote.substr(f.pos));
      break;
    case kStrClose:
      out.add(kGemmaQuote.substr(f.pos));
      return;
    case kStrLt:
      if (gemma_may_close(f)) {
        out.add(kGemmaQuote.substr(1));
        return;
      }
      if (p != nullptr) {  // the '<' is content: its shortest rest follows
        state = p->dfa.step(state, '<');
      } else {
        ++length;
      }
      break;
    case kStrUtf8:
      complete_utf8(f, out);
      break;
    default:
      break;
  }
  if (p != nullptr) {
    if constexpr (std::is_same_v<Out, CountBytes>) {
      out.size += p->paths.cost[state];
    } else {
      for (; !p->dfa.accepting[state]; state = p->dfa.step(state, p->paths.first_byte[state])) {
        out.add(static_cast<char>(p->paths.first_byte[state]));
      }
    }
  } else if (node != nullptr) {  // pad to minLength (a character begun above is counted)
    for (uint32_t n = length; n < node->min_length; ++n) out.add('a');
  }
  out.add(kGemmaQuote);
}

template <class Out>
void JsonGrammar::complete_pattern_string(const JsonFrame& f, Out& out) const {
  const StringPattern& p = pattern_of(schema_.nodes[f.node]);
  auto state = static_cast<uint16_t>(f.candidates);
  if (f.sub == kStrOpen) {
    out.add('"');
  } else if (f.sub == kStrEscape) {
    const int e = cheapest_escape(p, state, f.current);
    out.add(static_cast<char>(e));
    state = p.dfa.step(state, static_cast<uint8_t>(unescaped(static_cast<uint8_t>(e))));
  }
  if constexpr (std::is_same_v<Out, CountBytes>) {
    out.size += p.paths.cost[state];
  } else {
    while (!p.dfa.accepting[state]) {
      const uint8_t c = p.paths.first_byte[state];
      add_escaped(c, out);
      state = p.dfa.step(state, c);
    }
  }
  out.add('"');
}

template <class Out>
void JsonGrammar::close_object(const SchemaNode& node, uint32_t from, bool first, Out& out) const {
  for (uint32_t i = from; i < node.properties.size(); ++i) {
    const SchemaProperty& property = node.properties[i];
    if (!property.required) continue;
    if (!first) out.add(',');
    first = false;
    out.add(property.key);
    out.add(key_separator_);
    out.add(minimal_value(property.node));
  }
  out.add('}');
}

uint32_t JsonGrammar::shortest_key_choice(const SchemaNode& node, uint64_t keys, uint32_t from,
                                          uint16_t pos) const {
  uint32_t best = 0;
  size_t best_size = SIZE_MAX;
  for (uint64_t bits = keys; bits != 0; bits &= bits - 1) {
    const auto i = from + static_cast<uint32_t>(lowest_bit(bits));
    CountBytes rest;
    size_t size;
    if (node.tagged) {  // the entry holds the value: the selected shape's rest follows
      close_object(schema_.nodes[node.properties[i].node], 1, /*first=*/false, rest);
      size = node.properties[i].key.size() - pos + rest.size;
    } else {
      close_object(node, i + 1, /*first=*/false, rest);
      size = node.properties[i].key.size() - pos + key_separator_.size() +
             minimal_value(node.properties[i].node).size() + rest.size;
    }
    if (size < best_size) {
      best_size = size;
      best = i;
    }
  }
  return best;
}

template <class Out>
void JsonGrammar::complete_object(const JsonFrame& f, bool top, Out& out) const {
  const SchemaNode& node = schema_.nodes[f.node];
  if (!top) {  // the value of property `current` is open above: it finishes first
    close_object(node, f.count, /*first=*/false, out);
    return;
  }
  auto key_then_rest = [&](uint64_t keys, uint16_t pos) {
    const uint32_t i = shortest_key_choice(node, keys, f.count, pos);
    out.add(std::string_view(node.properties[i].key).substr(pos));
    if (node.tagged) {
      close_object(schema_.nodes[node.properties[i].node], 1, /*first=*/false, out);
      return;
    }
    out.add(key_separator_);
    out.add(minimal_value(node.properties[i].node));
    close_object(node, i + 1, /*first=*/false, out);
  };
  if (node.tagged && (f.sub == kObjOpen || f.sub == kObjFirst)) {  // its shortest shape
    out.add(std::string_view(node.minimal).substr(f.sub == kObjOpen ? 0 : 1));
    return;
  }
  switch (f.sub) {
    case kObjOpen:
      out.add('{');
      [[fallthrough]];
    case kObjFirst:
      close_object(node, f.count, /*first=*/true, out);
      return;
    case kObjKey:
      key_then_rest(f.candidates, f.pos);
      return;
    case kObjColon:
      out.add(':');
      [[fallthrough]];
    case kObjAfterColon:
    case kObjAfterColonSpace:
      out.add(minimal_value(node.properties[f.current].node));
      [[fallthrough]];
    case kObjValueDone:
      close_object(node, f.count, /*first=*/false, out);
      return;
    case kObjAfterComma:
    case kObjAfterCommaSpace:  // a comma was written: a property must follow
      key_then_rest(eligible_keys(node, f.count), 0);
      return;
  }
}

template <class Out>
void JsonGrammar::complete_array(const JsonFrame& f, bool top, Out& out) const {
  const SchemaNode& node = schema_.nodes[f.node];
  uint32_t items = f.count;
  if (!top) {
    ++items;  // the open item above finishes first
  } else {
    switch (f.sub) {
      case kArrOpen:
        out.add('[');
        [[fallthrough]];
      case kArrFirst:
        if (node.min_items > 0) out.add(minimal_value(node.item(items++)));
        break;
      case kArrAfterComma:
      case kArrAfterCommaSpace:  // a comma was written: an item must follow
        out.add(minimal_value(node.item(items++)));
        break;
      default:
        break;
    }
  }
  for (; items < node.min_items; ++items) {
    out.add(',');
    out.add(minimal_value(node.item(items)));
  }
  out.add(']');
}

}  // namespace rne::grammar

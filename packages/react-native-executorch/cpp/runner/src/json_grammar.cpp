#include "rne/runner/json_grammar.h"

namespace rne::runner {

namespace {

using Feed = JsonGrammar::Feed;

enum StringSub : uint8_t { kStrOpen, kStrBody, kStrEscape, kStrHex, kStrUtf8 };
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

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

uint32_t byte_range(uint8_t lo, uint8_t hi) { return (uint32_t{lo} << 8) | hi; }

// A UTF-8 lead byte: how many continuation bytes follow and the range of the first one
// (which excludes overlong forms, surrogates and code points above U+10FFFF). 0: not a lead.
int utf8_lead(uint8_t c, uint32_t& first_range) {
  first_range = byte_range(0x80, 0xBF);
  if (c >= 0xC2 && c <= 0xDF) return 1;
  if (c == 0xE0) first_range = byte_range(0xA0, 0xBF);
  if (c == 0xED) first_range = byte_range(0x80, 0x9F);
  if (c >= 0xE0 && c <= 0xEF) return 2;
  if (c == 0xF0) first_range = byte_range(0x90, 0xBF);
  if (c == 0xF4) first_range = byte_range(0x80, 0x8F);
  if (c >= 0xF0 && c <= 0xF4) return 3;
  return 0;
}

bool number_accepting(uint8_t sub) {
  return sub == kNumZero || sub == kNumInt || sub == kNumFrac || sub == kNumExpDigits;
}

int lowest_bit(uint64_t bits) { return __builtin_ctzll(bits); }

// An object or array that accepted a byte by opening a value frame: the byte is that value's.
bool pushed_value(const JsonStack& stack, Feed result) {
  return result == Feed::kAccepted && !stack.empty() && stack.back().kind == JsonGrammar::kValue;
}

}  // namespace

JsonStack JsonGrammar::start() const {
  JsonFrame root;
  root.node = schema_.root;
  root.kind = kValue;
  return {root};
}

bool JsonGrammar::push_value(JsonStack& stack, uint32_t node) const {
  if (stack.size() >= kMaxDepth) return false;
  JsonFrame frame;
  frame.node = node;
  frame.kind = kValue;
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
  // Properties come in schema order; optional ones may be skipped, a required one may not.
  uint64_t bits = 0;
  for (uint32_t i = from; i < node.properties.size(); ++i) {
    bits |= uint64_t{1} << i;
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
  if (top.kind == kNumber) return number_accepting(top.sub);
  if (top.kind == kLiteral) return literal_complete(top);
  return false;
}

// Turns a value frame into the frame of the type its first byte starts; the byte is then fed to
// that frame.
Feed JsonGrammar::feed_value(JsonStack& stack, uint8_t c) const {
  JsonFrame& f = stack.back();
  const SchemaNode& node = schema_.nodes[f.node];
  JsonFrame next;
  if (!node.literals.empty()) {
    next.node = f.node;
    next.kind = kLiteral;
    next.candidates = node.literals.size() == 64 ? ~uint64_t{0}
                                                 : (uint64_t{1} << node.literals.size()) - 1;
  } else if (c == '"' && (node.types & kJsonString)) {
    next.kind = kString;
  } else if ((c == '-' || is_digit(c)) && (node.types & (kJsonNumber | kJsonInteger))) {
    next.kind = kNumber;
    next.count = (node.types & kJsonNumber) ? 0 : 1;
  } else if ((c == 't' || c == 'f') && (node.types & kJsonBoolean)) {
    next.kind = kLiteral;
    next.node = schema_.boolean_node;
    next.candidates = 0b11;
  } else if (c == 'n' && (node.types & kJsonNull)) {
    next.kind = kLiteral;
    next.node = schema_.null_node;
    next.candidates = 0b1;
  } else if (c == '{' && (node.types & kJsonObject)) {
    next.kind = kObject;
    next.node = f.node;
  } else if (c == '[' && (node.types & kJsonArray)) {
    next.kind = kArray;
    next.node = f.node;
  } else {
    return Feed::kRejected;
  }
  f = next;
  return Feed::kAccepted;
}

Feed JsonGrammar::feed_string(JsonStack& stack, uint8_t c, bool open_bottom) const {
  JsonFrame& f = stack.back();
  switch (f.sub) {
    case kStrOpen:
      if (c != '"') return Feed::kRejected;
      f.sub = kStrBody;
      return Feed::kAccepted;
    case kStrBody:
      if (c == '"') return finish(stack, open_bottom);
      if (c == '\\') {
        f.sub = kStrEscape;
      } else if (c >= 0x80) {
        uint32_t range;
        const int continuation = utf8_lead(c, range);
        if (continuation == 0) return Feed::kRejected;
        f.sub = kStrUtf8;
        f.pos = static_cast<uint16_t>(continuation);
        f.count = range;
      } else if (c < 0x20) {
        return Feed::kRejected;  // control characters must be escaped in JSON
      }
      return Feed::kAccepted;
    case kStrEscape:
      if (c == 'u') {
        f.sub = kStrHex;
        f.pos = 0;
        return Feed::kAccepted;
      }
      for (char e : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) {
        if (c == static_cast<uint8_t>(e)) {
          f.sub = kStrBody;
          return Feed::kAccepted;
        }
      }
      return Feed::kRejected;
    case kStrHex:
      if (!is_hex(c)) return Feed::kRejected;
      if (++f.pos == 4) {
        f.sub = kStrBody;
        f.pos = 0;
      }
      return Feed::kAccepted;
    case kStrUtf8:
      if (c < (f.count >> 8) || c > (f.count & 0xFF)) return Feed::kRejected;
      f.count = byte_range(0x80, 0xBF);
      if (--f.pos == 0) {
        f.sub = kStrBody;
        f.count = 0;
      }
      return Feed::kAccepted;
  }
  return Feed::kRejected;
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
  // Fraction, exponent, or the end of the number (the byte then belongs to the parent).
  auto after_digits = [&](bool fraction_allowed) {
    if (!integer && fraction_allowed && c == '.') return to(kNumDot, 0);
    if (!integer && (c == 'e' || c == 'E')) return to(kNumExp, 0);
    reprocess = true;
    return finish(stack, open_bottom);
  };
  switch (f.sub) {
    case kNumStart:
      if (c == '-') return to(kNumMinus, 0);
      [[fallthrough]];
    case kNumMinus:
      if (c == '0') return to(kNumZero, 0);
      if (is_digit(c)) return to(kNumInt, 1);
      return Feed::kRejected;
    case kNumZero:
      return after_digits(true);
    case kNumInt:
      if (is_digit(c) && f.pos < kMaxIntegerDigits) return to(kNumInt, f.pos + 1);
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
  auto start_key = [&]() {
    if (c != '"') return Feed::kRejected;
    f.candidates = eligible_keys(node, f.count);
    if (f.candidates == 0) return Feed::kRejected;
    f.sub = kObjKey;
    f.pos = 1;  // every key literal starts with the quote
    return Feed::kAccepted;
  };
  // '}' may come unless a required property is still missing (the last eligible one).
  auto may_close = [&]() {
    const uint64_t eligible = eligible_keys(node, f.count);
    return eligible == 0 || !node.properties[63 - __builtin_clzll(eligible)].required;
  };
  switch (f.sub) {
    case kObjOpen:
      if (c != '{') return Feed::kRejected;
      f.sub = kObjFirst;
      return Feed::kAccepted;
    case kObjFirst:
      if (c == '}') return may_close() ? finish(stack, open_bottom) : Feed::kRejected;
      return start_key();
    case kObjKey: {
      uint64_t next = 0;
      for (uint64_t bits = f.candidates; bits != 0; bits &= bits - 1) {
        const std::string& key = node.properties[lowest_bit(bits)].key;
        if (key.size() > f.pos && static_cast<uint8_t>(key[f.pos]) == c) {
          next |= bits & (~bits + 1);
        }
      }
      if (next == 0) return Feed::kRejected;
      f.candidates = next;
      ++f.pos;
      // Keys end with an unescaped quote, so none is a prefix of another: a match is unique.
      const int first = lowest_bit(next);
      if ((next & (next - 1)) == 0 && node.properties[first].key.size() == f.pos) {
        f.current = static_cast<uint32_t>(first);
        f.count = f.current + 1;
        f.candidates = 0;
        f.pos = 0;
        f.sub = kObjColon;
      }
      return Feed::kAccepted;
    }
    case kObjColon:
      if (c != ':') return Feed::kRejected;
      f.sub = kObjAfterColon;
      return Feed::kAccepted;
    case kObjAfterColon:
      if (c == ' ') {
        f.sub = kObjAfterColonSpace;
        return Feed::kAccepted;
      }
      [[fallthrough]];
    case kObjAfterColonSpace: {
      const uint32_t value_node = node.properties[f.current].node;
      // The caller feeds c to the new value frame.
      return push_value(stack, value_node) ? Feed::kAccepted : Feed::kRejected;
    }
    case kObjValueDone:
      if (c == ',' && eligible_keys(node, f.count) != 0) {
        f.sub = kObjAfterComma;
        return Feed::kAccepted;
      }
      if (c == '}' && may_close()) return finish(stack, open_bottom);
      return Feed::kRejected;
    case kObjAfterComma:
      if (c == ' ') {
        f.sub = kObjAfterCommaSpace;
        return Feed::kAccepted;
      }
      return start_key();
    case kObjAfterCommaSpace:
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
    return push_value(stack, node.items) ? Feed::kAccepted : Feed::kRejected;
  };
  switch (f.sub) {
    case kArrOpen:
      if (c != '[') return Feed::kRejected;
      f.sub = kArrFirst;
      return Feed::kAccepted;
    case kArrFirst:
      if (c == ']') return node.min_items == 0 ? finish(stack, open_bottom) : Feed::kRejected;
      return start_item();
    case kArrValueDone:
      if (c == ',' && f.count < node.max_items) {
        f.sub = kArrAfterComma;
        return Feed::kAccepted;
      }
      if (c == ']' && f.count >= node.min_items) return finish(stack, open_bottom);
      return Feed::kRejected;
    case kArrAfterComma:
      if (c == ' ') {
        f.sub = kArrAfterCommaSpace;
        return Feed::kAccepted;
      }
      return start_item();
    case kArrAfterCommaSpace:
      return start_item();
  }
  return Feed::kRejected;
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

}  // namespace rne::runner

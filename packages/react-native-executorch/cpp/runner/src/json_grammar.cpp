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

JsonGrammar::JsonGrammar(const JsonSchema& schema) : schema_(schema) { compute_minimal_values(); }

// Shortest value per node, by fixed point: a node's candidates use its children's current
// values, and rounds repeat until none gets shorter (the "any value" node refers to itself).
void JsonGrammar::compute_minimal_values() {
  const size_t unknown = SIZE_MAX;
  std::vector<size_t> sizes(schema_.nodes.size(), unknown);
  minimal_values_.assign(schema_.nodes.size(), std::string());
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t id = 0; id < schema_.nodes.size(); ++id) {
      const SchemaNode& node = schema_.nodes[id];
      std::string best;
      size_t best_size = unknown;
      auto consider = [&](std::string candidate) {
        if (candidate.size() < best_size) {
          best_size = candidate.size();
          best = std::move(candidate);
        }
      };
      if (!node.literals.empty()) {
        for (const std::string& literal : node.literals) consider(literal);
      } else {
        if (node.types & (kJsonNumber | kJsonInteger)) consider("0");
        if (node.types & kJsonString) consider("\"\"");
        if (node.types & kJsonBoolean) consider("true");
        if (node.types & kJsonNull) consider("null");
        if (node.types & kJsonObject) {
          std::string object = "{";
          bool known = true;
          for (const SchemaProperty& property : node.properties) {
            if (!property.required) continue;
            known = known && sizes[property.node] != unknown;
            if (!known) break;
            if (object.size() > 1) object += ',';
            object += property.key + ":" + minimal_values_[property.node];
          }
          if (known) consider(object + "}");
        }
        if ((node.types & kJsonArray) && (node.min_items == 0 || sizes[node.items] != unknown)) {
          std::string array = "[";
          for (uint32_t i = 0; i < node.min_items; ++i) {
            if (i > 0) array += ',';
            array += minimal_values_[node.items];
          }
          consider(array + "]");
        }
      }
      if (best_size < sizes[id]) {
        sizes[id] = best_size;
        minimal_values_[id] = std::move(best);
        changed = true;
      }
    }
  }
}

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
      out.add(minimal_values_[f.node]);
      return;
    case kString:
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
        case kStrUtf8:  // the lowest allowed byte, then the lowest continuations
          out.add(static_cast<char>(f.count >> 8));
          for (uint16_t p = 1; p < f.pos; ++p) out.add('\x80');
          break;
        default:
          break;
      }
      out.add('"');
      return;
    case kNumber:
      if (!number_accepting(f.sub)) out.add('0');  // after '-', '.', 'e' or the sign
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
  }
}

template <class Out>
void JsonGrammar::close_object(const SchemaNode& node, uint32_t from, bool first, Out& out) const {
  for (uint32_t i = from; i < node.properties.size(); ++i) {
    const SchemaProperty& property = node.properties[i];
    if (!property.required) continue;
    if (!first) out.add(',');
    first = false;
    out.add(property.key);
    out.add(':');
    out.add(minimal_values_[property.node]);
  }
  out.add('}');
}

uint32_t JsonGrammar::shortest_key_choice(const SchemaNode& node, uint64_t keys,
                                          uint16_t pos) const {
  uint32_t best = 0;
  size_t best_size = SIZE_MAX;
  for (uint64_t bits = keys; bits != 0; bits &= bits - 1) {
    const auto i = static_cast<uint32_t>(lowest_bit(bits));
    CountBytes rest;
    close_object(node, i + 1, /*first=*/false, rest);
    const size_t size = node.properties[i].key.size() - pos + 1 +
                        minimal_values_[node.properties[i].node].size() + rest.size;
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
    const uint32_t i = shortest_key_choice(node, keys, pos);
    out.add(std::string_view(node.properties[i].key).substr(pos));
    out.add(':');
    out.add(minimal_values_[node.properties[i].node]);
    close_object(node, i + 1, /*first=*/false, out);
  };
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
      out.add(minimal_values_[node.properties[f.current].node]);
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
  const std::string& item = minimal_values_[node.items];
  uint32_t items = f.count;
  if (!top) {
    ++items;  // the open item above finishes first
  } else {
    switch (f.sub) {
      case kArrOpen:
        out.add('[');
        [[fallthrough]];
      case kArrFirst:
        if (node.min_items > 0) {
          out.add(item);
          ++items;
        }
        break;
      case kArrAfterComma:
      case kArrAfterCommaSpace:  // a comma was written: an item must follow
        out.add(item);
        ++items;
        break;
      default:
        break;
    }
  }
  for (; items < node.min_items; ++items) {
    out.add(',');
    out.add(item);
  }
  out.add(']');
}

}  // namespace rne::runner

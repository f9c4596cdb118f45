#include "rne/json/json.h"

#include <cmath>
#include <cstdlib>

namespace rne::json {

bool Value::is_integer() const {
  if (!is_number()) return false;
  const double d = as_number();
  return std::floor(d) == d && std::fabs(d) < 9.0e18;
}

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [name, value] : as_object()) {
    if (name == key) return &value;
  }
  return nullptr;
}

const char* Value::type_name() const {
  switch (data_.index()) {
    case 0: return "null";
    case 1: return "bool";
    case 2: return "number";
    case 3: return "string";
    case 4: return "array";
    default: return "object";
  }
}

namespace {

// Deep documents are rejected instead of overflowing the stack.
constexpr int kMaxDepth = 256;

class Parser {
 public:
  Parser(std::string_view text, ParseError& error) : text_(text), error_(error) {}

  bool parse_document(Value& out) {
    skip_whitespace();
    if (!parse_value(out, 0)) return false;
    skip_whitespace();
    if (pos_ != text_.size()) return fail("unexpected trailing characters after the JSON value");
    return true;
  }

 private:
  bool fail(std::string message, ErrorCode code = ErrorCode::kSyntax) {
    error_.code = code;
    error_.offset = pos_;
    error_.message = std::move(message);
    return false;
  }

  void skip_whitespace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool consume_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool parse_value(Value& out, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep", ErrorCode::kTooDeep);
    if (pos_ >= text_.size()) return fail("unexpected end of input");
    switch (text_[pos_]) {
      case '{': return parse_object(out, depth);
      case '[': return parse_array(out, depth);
      case '"': {
        std::string s;
        if (!parse_string(s)) return false;
        out = Value(std::move(s));
        return true;
      }
      case 't': out = Value(true); return consume_literal("true");
      case 'f': out = Value(false); return consume_literal("false");
      case 'n': out = Value(); return consume_literal("null");
      default: return parse_number(out);
    }
  }

  // Consumes the next byte where it is `c`.
  bool take(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  bool parse_object(Value& out, int depth) {
    ++pos_;  // '{'
    Object members;
    skip_whitespace();
    if (take('}')) {
      out = Value(std::move(members));
      return true;
    }
    while (true) {
      skip_whitespace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return fail("expected a string key");
      std::string key;
      if (!parse_string(key)) return false;
      skip_whitespace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return fail("expected ':' after key");
      ++pos_;
      skip_whitespace();
      Value value;
      if (!parse_value(value, depth + 1)) return false;
      members.emplace_back(std::move(key), std::move(value));
      bool more = false;
      if (!separator('}', "object", more)) return false;
      if (!more) break;
    }
    out = Value(std::move(members));
    return true;
  }

  // After a member of an object or an item of an array (`what`): a ',' (`more`) or `close`.
  bool separator(char close, const char* what, bool& more) {
    skip_whitespace();
    if (pos_ >= text_.size()) return fail(std::string("unexpected end of input in ") + what);
    const char c = text_[pos_];
    if (c != ',' && c != close) {
      return fail(std::string("expected ',' or '") + close + "' in " + what);
    }
    ++pos_;
    more = c == ',';
    return true;
  }

  bool parse_array(Value& out, int depth) {
    ++pos_;  // '['
    Array items;
    skip_whitespace();
    if (take(']')) {
      out = Value(std::move(items));
      return true;
    }
    while (true) {
      skip_whitespace();
      Value value;
      if (!parse_value(value, depth + 1)) return false;
      items.push_back(std::move(value));
      bool more = false;
      if (!separator(']', "array", more)) return false;
      if (!more) break;
    }
    out = Value(std::move(items));
    return true;
  }

  bool parse_hex4(uint32_t& out) {
    if (pos_ + 4 > text_.size()) return fail("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      out <<= 4;
      if (c >= '0' && c <= '9') out |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') out |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') out |= static_cast<uint32_t>(c - 'A' + 10);
      else return fail("invalid hex digit in \\u escape");
    }
    return true;
  }

  bool parse_string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      // Copy the run of ordinary bytes in one go; this is the hot loop for big vocabularies.
      const size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\\' &&
             static_cast<unsigned char>(text_[pos_]) >= 0x20) {
        ++pos_;
      }
      out.append(text_.data() + start, pos_ - start);
      if (pos_ >= text_.size()) return fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        --pos_;
        return fail("control character in string");
      }
      if (pos_ >= text_.size()) return fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!parse_hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // A high surrogate must be followed by a low one: together they are one code point.
            uint32_t low = 0;
            if (text_.substr(pos_, 2) != "\\u") return fail("unpaired surrogate in \\u escape");
            pos_ += 2;
            if (!parse_hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return fail("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail("unpaired surrogate in \\u escape");
          }
          append_utf8(cp, out);
          break;
        }
        default: --pos_; return fail("invalid escape character");
      }
    }
  }

  bool parse_number(Value& out) {
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t s = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - s;
    };
    if (digits() == 0) {
      pos_ = start;
      return fail("invalid value");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return fail("expected digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return fail("expected digits in exponent");
    }
    // strtod needs a terminated buffer; numbers are short, so copy.
    const std::string literal(text_.substr(start, pos_ - start));
    out = Value(std::strtod(literal.c_str(), nullptr));
    return true;
  }

  std::string_view text_;
  ParseError& error_;
  size_t pos_ = 0;
};

}  // namespace

void set(Object& object, const std::string& key, Value value) {
  for (auto& [k, v] : object) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  object.emplace_back(key, std::move(value));
}

base::Result<Value, ParseError> parse(std::string_view text) {
  ParseError error;
  Value value;
  if (!Parser(text, error).parse_document(value)) return error;
  return value;
}

namespace {

void append_u_escape(uint32_t unit, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xF];
}

}  // namespace

void write_string(std::string_view s, std::string& out, const StringStyle& style) {
  out += '"';
  size_t pos = 0;
  while (pos < s.size()) {
    const auto c = static_cast<unsigned char>(s[pos]);
    if (c >= 0x80 && !style.python) {
      out += s[pos++];
      continue;
    }
    const uint32_t cp = c < 0x80 ? s[pos++] & 0x7F : next_code_point(s, pos);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b':
      case '\f':
        if (style.python) {
          out += cp == '\b' ? "\\b" : "\\f";
        } else {
          append_u_escape(cp, out);
        }
        break;
      default:
        if (cp < 0x20 || (style.ensure_ascii && cp > 0x7E && cp < 0x10000)) {
          append_u_escape(cp, out);
        } else if (style.ensure_ascii && cp >= 0x10000) {
          append_u_escape(0xD800 + ((cp - 0x10000) >> 10), out);
          append_u_escape(0xDC00 + ((cp - 0x10000) & 0x3FF), out);
        } else {
          append_utf8(cp, out);
        }
    }
  }
  out += '"';
}

uint32_t next_code_point(std::string_view s, size_t& pos) {
  const auto c = static_cast<unsigned char>(s[pos]);
  const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || pos + len > s.size()) {
    ++pos;
    return 0xFFFD;
  }
  uint32_t cp = len == 1 ? c : c & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  pos += len;
  return cp;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace rne::json

#include "value.h"

#include "rne/json/json.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace rne::chat::detail {

void fail(ErrorKind kind, std::string message) { throw Fail{kind, std::move(message)}; }

namespace {

thread_local Budget* g_budget = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

BudgetScope::BudgetScope(Budget& budget) : previous_(g_budget) {
  if (budget.max_ms > 0 && budget.deadline_ns == 0) budget.deadline_ns = now_ns() + int64_t{budget.max_ms} * 1'000'000;
  g_budget = &budget;
}
BudgetScope::~BudgetScope() { g_budget = previous_; }

void charge_steps(size_t n) {
  Budget* b = g_budget;
  if (!b) return;
  const size_t before = b->steps;
  b->steps += n;
  if (b->steps > b->max_steps) {
    fail(ErrorKind::kLimit, "the template ran more than " + std::to_string(b->max_steps) +
                                " steps (Limits::max_steps; a runaway loop or recursion?)");
  }
  // The clock is read every 4096 steps: cheap, and a step is bounded work.
  if (b->deadline_ns != 0 && (before >> 12) != (b->steps >> 12) && now_ns() > b->deadline_ns) {
    fail(ErrorKind::kLimit, "the template ran longer than " + std::to_string(b->max_ms) + " ms (Limits::max_render_ms)");
  }
}

void charge_bytes(size_t n) {
  Budget* b = g_budget;
  if (!b) return;
  reserve_bytes(n);
  b->bytes += n;
  if (b->bytes > b->max_bytes) {
    fail(ErrorKind::kLimit, "the template created more than " + std::to_string(b->max_bytes >> 20) +
                                " MiB of strings and lists (Limits::max_alloc_bytes)");
  }
}

void reserve_bytes(size_t n) {
  Budget* b = g_budget;
  if (!b) return;
  if (n > b->max_value_bytes) {
    fail(ErrorKind::kLimit, "a string or list would pass " + std::to_string(b->max_value_bytes >> 20) +
                                " MiB (Limits::max_value_bytes)");
  }
  if (n > b->max_bytes - std::min(b->bytes, b->max_bytes)) {
    fail(ErrorKind::kLimit, "a string or list would pass the " + std::to_string(b->max_bytes >> 20) +
                                " MiB the template may create (Limits::max_alloc_bytes)");
  }
}

void fail_undefined(const Value& v) { fail(v.b ? ErrorKind::kSecurity : ErrorKind::kUndefined, v.s); }

Value Value::undefined(std::string why) {
  Value v;
  v.s = std::move(why);
  return v;
}
Value Value::unsafe(std::string why) {
  Value v = undefined(std::move(why));
  v.b = true;
  return v;
}
Value Value::none() {
  Value v;
  v.type = Type::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.type = Type::kBool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.type = Type::kInt;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.type = Type::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  charge_bytes(x.size());
  Value v;
  v.type = Type::kString;
  v.s = std::move(x);
  return v;
}
namespace {

// The slots of a new list or dict, and the strings its items hold by value (nested lists and
// dicts are shared, not copied).
template <typename Items, typename Get>
uint16_t nesting(const Items& items, Get get) {
  uint16_t deepest = 0;
  size_t bytes = items.size() * sizeof(typename Items::value_type);
  for (const auto& item : items) {
    deepest = std::max(deepest, get(item).depth);
    bytes += get(item).s.size();
  }
  charge_bytes(bytes);
  charge_steps(items.size() >> 4);
  if (deepest >= kMaxValueDepth) {
    fail(ErrorKind::kLimit, "lists and dicts nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
  return static_cast<uint16_t>(deepest + 1);
}

}  // namespace

Value Value::make_list(List items, bool is_tuple) {
  Value v;
  v.depth = nesting(items, [](const Value& x) -> const Value& { return x; });
  v.type = Type::kList;
  v.tuple = is_tuple;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::make_generator(List items) {
  Value v = make_list(std::move(items));
  v.generator = true;
  return v;
}
Value Value::make_markup(std::string text) {
  Value v = string(std::move(text));
  v.markup = true;
  return v;
}
std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}
Value Value::make_dict(Dict items) {
  Value v;
  v.depth = nesting(items, [](const std::pair<Value, Value>& x) -> const Value& { return x.second; });
  v.type = Type::kDict;
  v.dict = std::make_shared<Dict>(std::move(items));
  return v;
}
Value Value::make_namespace(Dict items) {
  Value v = make_dict(std::move(items));
  v.type = Type::kNamespace;
  return v;
}
Value Value::function(std::string name, Function f) {
  Value v;
  v.type = Type::kFunction;
  v.fn = std::make_shared<Function>(std::move(f));
  v.fn_name = std::move(name);
  return v;
}

bool Value::truthy() const {
  switch (type) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool: return b;
    case Type::kInt: return i != 0;
    case Type::kFloat: return f != 0;
    case Type::kString: return !s.empty();
    case Type::kList: return generator || !list->empty();
    case Type::kDict: return !dict->empty();
    default: return true;
  }
}

const Value* Value::lookup(const Value& key) const {
  if (type != Type::kDict && type != Type::kNamespace) return nullptr;
  charge_steps(dict->size() >> 5);  // a linear search: a huge input dict costs its size
  for (const auto& [k, v] : *dict) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Value::lookup(const std::string& key) const {
  if (type != Type::kDict && type != Type::kNamespace) return nullptr;
  charge_steps(dict->size() >> 5);
  for (const auto& [k, v] : *dict) {
    if (k.type == Type::kString && k.s == key) return &v;
  }
  return nullptr;
}

bool equals(const Value& a, const Value& b) {
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.type == T::kFloat || b.type == T::kFloat) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case T::kUndefined:
    case T::kNone: return true;
    case T::kString: return a.s == b.s;
    case T::kList: {
      if (a.generator || b.generator) return a.list == b.list;  // identity, as Python's objects
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      charge_steps(a.list->size() >> 4);
      for (size_t i = 0; i < a.list->size(); ++i) {
        if (!equals((*a.list)[i], (*b.list)[i])) return false;
      }
      return true;
    }
    case T::kDict: {
      if (a.dict->size() != b.dict->size()) return false;
      charge_steps(a.dict->size() >> 4);
      for (const auto& [k, v] : *a.dict) {
        const Value* other = b.lookup(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    default: return a.dict == b.dict && a.fn == b.fn;  // identity
  }
}

bool less(const Value& a, const Value& b) {
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.type == T::kFloat || b.type == T::kFloat) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.type == T::kString && b.type == T::kString) return a.s < b.s;  // UTF-8 order = code points
  if (a.type == T::kList && b.type == T::kList && a.tuple == b.tuple && !a.generator && !b.generator) {
    const auto& x = *a.list;
    const auto& y = *b.list;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) {
    fail_undefined(a.is_undefined() ? a : b);
  }
  fail(ErrorKind::kType, "'<' not supported between instances of '" + type_name(a) + "' and '" +
                             type_name(b) + "'");
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // The shortest digits that read back as `d`, laid out as Python's repr does.
  char buf[64];
  for (int precision = 0; precision < 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string text(buf);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (size_t k = 0; k < e; ++k) {
    if (text[k] != '.') digits += text[k];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

namespace {

using json::append_utf8;

// str.isprintable() for repr(): an approximation of Unicode's "other" and separator categories
// that covers the control, format, private-use and space characters text actually carries.
bool is_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  if (c >= 0xF0000) return false;  // planes 15-16: private use
  return true;
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode_utf8(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (is_printable(c)) {
      append_utf8(c, out);
    } else {
      if (c < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    }
  }
  return out + quote;
}

}  // namespace

std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out += json::next_code_point(s, i);  // invalid: U+FFFD
  return out;
}

std::string encode_utf8(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(c, out);
  return out;
}

size_t code_point_count(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string type_name(const Value& v) {
  using T = Value::Type;
  switch (v.type) {
    case T::kUndefined: return "Undefined";
    case T::kNone: return "NoneType";
    case T::kBool: return "bool";
    case T::kInt: return "int";
    case T::kFloat: return "float";
    case T::kString: return "str";
    case T::kList: return v.generator ? "generator" : v.tuple ? "tuple" : "list";
    case T::kDict: return "dict";
    case T::kNamespace: return "Namespace";
    case T::kFunction: return "function";
  }
  return "object";
}

std::string type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

std::string to_str(const Value& v) {
  using T = Value::Type;
  switch (v.type) {
    case T::kUndefined: return "";
    case T::kString: return v.s;
    default: return to_repr(v);
  }
}

std::string to_repr(const Value& v) {
  using T = Value::Type;
  switch (v.type) {
    case T::kUndefined: return "Undefined";
    case T::kNone: return "None";
    case T::kBool: return v.b ? "True" : "False";
    case T::kInt: return std::to_string(v.i);
    case T::kFloat: return python_float(v.f);
    case T::kString: return repr_string(v.s);
    case T::kList: {
      if (v.generator) return "<generator object>";  // Python adds an address
      std::string out = v.tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += to_repr((*v.list)[k]);
        charge_steps(1);
        reserve_bytes(out.size());  // shared sublists can print far larger than they are
      }
      if (v.tuple && v.list->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case T::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : *v.dict) {
        if (!first) out += ", ";
        first = false;
        out += to_repr(k) + ": " + to_repr(item);
        charge_steps(1);
        reserve_bytes(out.size());
      }
      return out + "}";
    }
    case T::kNamespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, item] : *v.dict) {
        if (!first) out += ", ";
        first = false;
        out += to_repr(k) + ": " + to_repr(item);
      }
      return out + "}>";
    }
    case T::kFunction: return "<function " + v.fn_name + ">";
  }
  return "";
}

namespace {

std::string json_key(const Value& k) {
  using T = Value::Type;
  switch (k.type) {
    case T::kString: return k.s;
    case T::kNone: return "null";
    case T::kBool: return k.b ? "true" : "false";
    case T::kInt: return std::to_string(k.i);
    case T::kFloat: return python_float(k.f);
    default:
      fail(ErrorKind::kType, "keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return python_float(d);
}

void write_json(const Value& v, const JsonStyle& style, int level, std::string& out) {
  using T = Value::Type;
  if (level > 256) fail(ErrorKind::kLimit, "tojson: value nested deeper than 256 levels");
  auto newline = [&](int depth) {
    reserve_bytes(out.size() + static_cast<size_t>(depth) * style.indent.size());
    out += '\n';
    for (int k = 0; k < depth; ++k) out += style.indent;
  };
  switch (v.type) {
    case T::kNone: out += "null"; return;
    case T::kBool: out += v.b ? "true" : "false"; return;
    case T::kInt: out += std::to_string(v.i); return;
    case T::kFloat: out += json_float(v.f); return;
    case T::kString: json::write_string(v.s, out, {true, style.ensure_ascii}); return;
    case T::kList: {
      if (v.generator) fail(ErrorKind::kType, "Object of type generator is not JSON serializable");
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += style.item_sep;
        if (style.has_indent) newline(level + 1);
        write_json((*v.list)[k], style, level + 1, out);
        charge_steps(1);
        reserve_bytes(out.size());
      }
      if (style.has_indent) newline(level);
      out += ']';
      return;
    }
    case T::kDict: {
      if (v.dict->empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, item] : *v.dict) items.emplace_back(json_key(k), &item);
      if (style.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
      }
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += style.item_sep;
        if (style.has_indent) newline(level + 1);
        json::write_string(items[k].first, out, {true, style.ensure_ascii});
        out += style.key_sep;
        write_json(*items[k].second, style, level + 1, out);
        charge_steps(1);
        reserve_bytes(out.size());
      }
      if (style.has_indent) newline(level);
      out += '}';
      return;
    }
    default:
      fail(ErrorKind::kType, "Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  write_json(v, style, 0, out);
  return out;
}

}  // namespace rne::chat::detail

// Filters, tests, globals and the str/dict/list methods templates call, with the semantics of
// Jinja's builtins, transformers' overrides (tojson, raise_exception, strftime_now, namespace)
// and Python's str methods.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <ctime>
#include <optional>
#include <set>

#include "interp.h"

namespace rne::chat::detail {
namespace {

const std::set<std::string>& filter_names() {
  static const std::set<std::string> names{
      "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first",
      "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list",
      "lower", "map", "max", "min", "pprint", "reject", "rejectattr", "replace", "reverse", "round",
      "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique",
      "upper", "wordcount"};
  return names;
}

const std::set<std::string>& test_names() {
  static const std::set<std::string> names{
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped", "even",
      "false", "float", "ge", ">=", "greaterthan", "gt", ">", "in", "integer", "iterable", "le",
      "<=", "lessthan", "lt", "<", "lower", "mapping", "ne", "!=", "none", "number", "odd",
      "sameas", "sequence", "string", "true", "undefined", "upper", "filter", "test"};
  return names;
}

// Simple case mapping: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (Python maps all
// of Unicode; templates upper-case type names and role names).
char32_t to_upper_cp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    if (c == 0x138 || c == 0x149 || c == 0x130) return c;
    return (c % 2 == 1) ? c - 1 : c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t to_lower_cp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x130) return 'i';
    if (c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

std::string upper(const std::string& s) {
  std::u32string u;
  for (char32_t c : decode_utf8(s)) {
    if (c == 0xDF) {
      u += U"SS";
    } else {
      u += to_upper_cp(c);
    }
  }
  return encode_utf8(u);
}

std::string lower(const std::string& s) {
  std::u32string u = decode_utf8(s);
  for (auto& c : u) c = to_lower_cp(c);
  return encode_utf8(u);
}

bool is_cased(char32_t c) { return to_upper_cp(c) != c || to_lower_cp(c) != c || c == 0xDF; }

std::string capitalize(const std::string& s) {
  std::u32string u = decode_utf8(lower(s));
  if (!u.empty()) u[0] = to_upper_cp(u[0]);
  return encode_utf8(u);
}

// Python's str.strip family; `chars` null: whitespace.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::u32string u = decode_utf8(s);
  std::u32string set;
  const bool by_space = !chars || chars->is_none() || chars->is_undefined();
  if (!by_space) {
    if (!chars->is_string()) fail(ErrorKind::kType, "strip arg must be None or str");
    set = decode_utf8(chars->s);
  }
  auto drop = [&](char32_t c) { return by_space ? is_py_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0;
  size_t e = u.size();
  if (left) {
    while (b < e && drop(u[b])) ++b;
  }
  if (right) {
    while (e > b && drop(u[e - 1])) --e;
  }
  return encode_utf8(u.substr(b, e - b));
}

List split(const std::string& s, const Value* sep_v, int64_t maxsplit, bool from_right) {
  List out;
  if (!sep_v || sep_v->is_none()) {
    std::u32string u = decode_utf8(s);
    std::vector<std::u32string> words;
    if (!from_right) {
      size_t k = 0;
      while (k < u.size()) {
        while (k < u.size() && is_py_space(u[k])) ++k;
        if (k >= u.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          size_t e = u.size();
          while (e > k && is_py_space(u[e - 1])) --e;
          words.push_back(u.substr(k, e - k));
          break;
        }
        size_t start = k;
        while (k < u.size() && !is_py_space(u[k])) ++k;
        words.push_back(u.substr(start, k - start));
        charge_bytes(sizeof(Value));  // a piece's slot, before a huge split is built
      }
    } else {
      size_t k = u.size();
      while (k > 0) {
        while (k > 0 && is_py_space(u[k - 1])) --k;
        if (k == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          size_t b = 0;
          while (b < k && is_py_space(u[b])) ++b;
          words.push_back(u.substr(b, k - b));
          break;
        }
        size_t end = k;
        while (k > 0 && !is_py_space(u[k - 1])) --k;
        words.push_back(u.substr(k, end - k));
        charge_bytes(sizeof(Value));
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto& w : words) out.push_back(Value::string(encode_utf8(w)));
    return out;
  }
  if (!sep_v->is_string()) fail(ErrorKind::kType, "must be str or None, not " + type_name(*sep_v));
  const std::string& sep = sep_v->s;
  if (sep.empty()) fail(ErrorKind::kValue, "empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
      const size_t at = s.find(sep, start);
      if (at == std::string::npos) break;
      parts.push_back(s.substr(start, at - start));
      charge_bytes(sizeof(Value));
      start = at + sep.size();
    }
    parts.push_back(s.substr(start));
  } else {
    size_t end = s.size();
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
      if (end < sep.size()) break;
      const size_t at = s.rfind(sep, end - sep.size());
      if (at == std::string::npos) break;
      parts.push_back(s.substr(at + sep.size(), end - at - sep.size()));
      charge_bytes(sizeof(Value));
      end = at;
    }
    parts.push_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
  }
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `repl` around every character
    std::u32string u = decode_utf8(s);
    const uint64_t inserts = count < 0 ? u.size() + 1 : std::min<uint64_t>(static_cast<uint64_t>(count), u.size() + 1);
    if (!repl.empty()) reserve_bytes(inserts > SIZE_MAX / repl.size() ? SIZE_MAX : inserts * repl.size());
    int64_t done = 0;
    for (size_t k = 0; k <= u.size(); ++k) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (k < u.size()) out += encode_utf8(std::u32string(1, u[k]));
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += repl;
    reserve_bytes(out.size());
    start = at + old.size();
    ++done;
  }
  return out + s.substr(start);
}

// Python's str.splitlines() boundaries.
std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  std::u32string u = decode_utf8(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t k = 0; k < u.size(); ++k) {
    const char32_t c = u[k];
    const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                          c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!boundary) continue;
    size_t end = k;
    if (c == '\r' && k + 1 < u.size() && u[k + 1] == '\n') ++k;
    lines.push_back(encode_utf8(u.substr(start, (keepends ? k + 1 : end) - start)));
    start = k + 1;
  }
  if (start < u.size()) lines.push_back(encode_utf8(u.substr(start)));
  return lines;
}

// Keyword-or-positional argument reader.
struct ArgReader {
  Args& args;
  const char* fname;
  const Value* get(size_t pos, const char* name) const {
    if (pos < args.positional.size()) return &args.positional[pos];
    for (const auto& [k, v] : args.keywords) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  bool flag(size_t pos, const char* name, bool def) const {
    const Value* v = get(pos, name);
    return v ? v->truthy() : def;
  }
  int64_t integer(size_t pos, const char* name, int64_t def) const {
    const Value* v = get(pos, name);
    if (!v || v->is_none()) return def;
    if (!v->is_integral()) fail(ErrorKind::kType, std::string(fname) + ": '" + name + "' must be an integer, got " + type_name(*v));
    return v->as_int();
  }
  std::string text(size_t pos, const char* name, const std::string& def) const {
    const Value* v = get(pos, name);
    return v ? to_str(*v) : def;
  }
};

const Value& need_string(const Value& v, const char* what) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) fail(ErrorKind::kType, std::string(what) + " requires a str, got " + type_name(v));
  return v;
}

// Jinja's attribute getter for filters: "a.b" and "0" path parts.
Value attr_path(Interp& in, const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    errno = 0;
    const long long index = numeric ? std::strtoll(part.c_str(), nullptr, 10) : 0;
    // An index past 64 bits indexes nothing (Python: IndexError, so Undefined).
    v = numeric && errno != ERANGE ? in.getitem(v, Value::integer(index)) : in.getitem(v, Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(lower(v.s));
  return v;
}

// Python int()/float() of a string; false when it is not a number.
bool parse_int(const std::string& text, int64_t base, int64_t& out) {
  errno = 0;
  std::string s = strip(text, nullptr, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return false;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, static_cast<int>(base));
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}
bool parse_float(const std::string& text, double& out) {
  std::string s = strip(text, nullptr, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

// printf-style formatting: "%s", "%d", "%r", "%f", "%.2f", "%%" (the `format` filter and %).
std::string percent_format(const std::string& fmt, const Value& arg) {
  List args = arg.is_list() && arg.tuple ? *arg.list : List{arg};
  std::string out;
  size_t next = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) fail(ErrorKind::kValue, "incomplete format");
    if (fmt[k] == '%') {
      out += '%';
      continue;
    }
    std::string spec = "%";
    while (k < fmt.size() && std::strchr("0123456789.-+ #", fmt[k])) spec += fmt[k++];
    if (k >= fmt.size()) fail(ErrorKind::kValue, "incomplete format");
    // Width and precision print that many characters: bounded before printf allocates them.
    for (size_t d = 0; d < spec.size();) {
      if (!std::isdigit(static_cast<unsigned char>(spec[d]))) {
        ++d;
        continue;
      }
      size_t end = d;
      while (end < spec.size() && std::isdigit(static_cast<unsigned char>(spec[end]))) ++end;
      if (end - d > 4) {
        fail(ErrorKind::kLimit, "format: a width or precision of " + spec.substr(d, end - d) +
                                    " is over this renderer's limit of 9999");
      }
      d = end;
    }
    const char conv = fmt[k];
    if (next >= args.size()) fail(ErrorKind::kType, "not enough arguments for format string");
    const Value& v = args[next++];
    char buf[32768];  // widths and precisions are at most 9999
    switch (conv) {
      case 's': out += to_str(v); break;
      case 'r': out += to_repr(v); break;
      case 'd':
      case 'i':
        if (!v.is_number()) fail(ErrorKind::kType, "%d format: a real number is required, not " + type_name(v));
        std::snprintf(buf, sizeof buf, (spec + "lld").c_str(),
                      static_cast<long long>(v.type == Value::Type::kFloat ? std::trunc(v.f) : v.as_int()));
        out += buf;
        break;
      case 'f':
      case 'e':
      case 'g':
        if (!v.is_number()) fail(ErrorKind::kType, "must be real number, not " + type_name(v));
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.as_float());
        out += buf;
        break;
      default: fail(ErrorKind::kValue, std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next < args.size() && !(args.size() == 1 && arg.is_dict())) {
    fail(ErrorKind::kType, "not all arguments converted during string formatting");
  }
  return out;
}

// str.format with "{}", "{0}" and "{name}" fields (format specs are not supported).
std::string brace_format(const std::string& fmt, Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '}' && k + 1 < fmt.size() && fmt[k + 1] == '}') {
      out += '}';
      ++k;
    } else if (c == '{' && k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
    } else if (c == '{') {
      const size_t end = fmt.find('}', k);
      if (end == std::string::npos) fail(ErrorKind::kValue, "Single '{' encountered in format string");
      const std::string field = fmt.substr(k + 1, end - k - 1);
      if (field.find(':') != std::string::npos || field.find('!') != std::string::npos) {
        fail(ErrorKind::kValue, "format specs in str.format are not supported by this renderer");
      }
      const Value* v = nullptr;
      if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
        if (field.size() > 18) fail(ErrorKind::kValue, "Too many decimal digits in format string");
        const size_t index = field.empty() ? auto_index++ : std::stoul(field);
        if (index < args.positional.size()) v = &args.positional[index];
        if (!v) fail(ErrorKind::kValue, "Replacement index " + std::to_string(index) + " out of range for positional args tuple");
      } else {
        for (const auto& [key, value] : args.keywords) {
          if (key == field) v = &value;
        }
        if (!v) fail(ErrorKind::kValue, "KeyError: '" + field + "'");
      }
      out += to_str(*v);
      k = end;
    } else {
      out += c;
    }
  }
  return out;
}

Value unsafe_method(const Value& obj, const std::string& name) {
  const std::string message = "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.";
  return Value::function(name, [message](Interp&, Args&) -> Value { fail(ErrorKind::kSecurity, message); });
}

Value string_method(const Value& obj, const std::string& name) {
  const std::string s = obj.s;
  auto method = [&](auto body) { return Value::function(name, body); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip";
    const bool right = name != "lstrip";
    return method([s, left, right](Interp&, Args& a) {
      return Value::string(strip(s, a.positional.empty() ? nullptr : &a.positional[0], left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool from_right = name == "rsplit";
    return method([s, from_right](Interp&, Args& a) {
      ArgReader r{a, "split"};
      return Value::make_list(split(s, r.get(0, "sep"), r.integer(1, "maxsplit", -1), from_right));
    });
  }
  if (name == "splitlines") {
    return method([s](Interp&, Args& a) {
      List out;
      for (auto& line : splitlines(s, ArgReader{a, "splitlines"}.flag(0, "keepends", false))) {
        out.push_back(Value::string(line));
      }
      return Value::make_list(std::move(out));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool start = name == "startswith";
    return method([s, start, name](Interp&, Args& a) {
      if (a.positional.empty()) fail(ErrorKind::kType, name + "() takes at least 1 argument (0 given)");
      const Value& p = a.positional[0];
      List options = p.is_list() && p.tuple ? *p.list : List{p};
      for (const Value& o : options) {
        if (!o.is_string()) {
          fail(ErrorKind::kType, name + " first arg must be str or a tuple of str, not " + type_name(o));
        }
        if (o.s.size() <= s.size() &&
            (start ? s.compare(0, o.s.size(), o.s) == 0 : s.compare(s.size() - o.s.size(), o.s.size(), o.s) == 0)) {
          return Value::boolean(true);
        }
      }
      return Value::boolean(false);
    });
  }
  if (name == "upper") return method([s](Interp&, Args&) { return Value::string(upper(s)); });
  if (name == "lower") return method([s](Interp&, Args&) { return Value::string(lower(s)); });
  if (name == "capitalize") return method([s](Interp&, Args&) { return Value::string(capitalize(s)); });
  if (name == "title") {
    return method([s](Interp&, Args&) {
      std::u32string u = decode_utf8(s);
      bool prev_cased = false;
      for (auto& c : u) {
        const bool cased = is_cased(c);
        c = cased ? (prev_cased ? to_lower_cp(c) : to_upper_cp(c)) : c;
        prev_cased = cased;
      }
      return Value::string(encode_utf8(u));
    });
  }
  if (name == "replace") {
    return method([s](Interp&, Args& a) {
      ArgReader r{a, "replace"};
      const Value* old_v = r.get(0, "old");
      const Value* new_v = r.get(1, "new");
      if (!old_v || !new_v) fail(ErrorKind::kType, "replace expected at least 2 arguments");
      return Value::string(replace(s, need_string(*old_v, "replace").s, need_string(*new_v, "replace").s,
                                   r.integer(2, "count", -1)));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return method([s, name](Interp&, Args& a) {
      if (a.positional.empty()) fail(ErrorKind::kType, name + "() takes at least 1 argument (0 given)");
      const std::string& sub = need_string(a.positional[0], name.c_str()).s;
      if (name == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(s)) + 1);
        int64_t n = 0;
        for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
        return Value::integer(n);
      }
      const size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
      if (at == std::string::npos) {
        if (name == "index" || name == "rindex") fail(ErrorKind::kValue, "substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(code_point_count(s.substr(0, at))));
    });
  }
  if (name == "join") {
    return method([s](Interp& in, Args& a) {
      if (a.positional.empty()) fail(ErrorKind::kType, "join() takes exactly one argument (0 given)");
      std::string out;
      bool first = true;
      for (const Value& item : in.iterate(a.positional[0])) {
        if (!item.is_string()) fail(ErrorKind::kType, "sequence item: expected str instance, " + type_name(item) + " found");
        if (!first) out += s;
        first = false;
        out += item.s;
        reserve_bytes(out.size());
      }
      return Value::string(out);
    });
  }
  if (name == "format") return method([s](Interp&, Args& a) { return Value::string(brace_format(s, a)); });
  if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    return method([s, prefix](Interp&, Args& a) {
      if (a.positional.empty()) fail(ErrorKind::kType, "takes exactly one argument (0 given)");
      const std::string& p = need_string(a.positional[0], "removeprefix").s;
      if (prefix && s.compare(0, p.size(), p) == 0) return Value::string(s.substr(p.size()));
      if (!prefix && p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
        return Value::string(s.substr(0, s.size() - p.size()));
      }
      return Value::string(s);
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper") {
    return method([s, name](Interp&, Args&) {
      const std::u32string u = decode_utf8(s);
      if (u.empty()) return Value::boolean(false);
      if (name == "islower" || name == "isupper") {
        bool any = false;
        for (char32_t c : u) {
          if (!is_cased(c)) continue;
          any = true;
          if ((name == "islower") != (to_lower_cp(c) == c && c != 0x178)) return Value::boolean(false);
        }
        return Value::boolean(any);
      }
      for (char32_t c : u) {
        const bool digit = c >= '0' && c <= '9';
        const bool alpha = is_cased(c) || (c >= 0x80 && !is_py_space(c) && !digit);
        const bool ok = name == "isdigit" ? digit : name == "isalpha" ? alpha : name == "isalnum" ? alpha || digit : is_py_space(c);
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(true);
    });
  }
  return Value::undefined();
}

Value dict_method(const Value& obj, const std::string& name) {
  const Value self = obj;
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function(name, [self, name](Interp&, Args&) {
      List out;
      for (const auto& [k, v] : *self.dict) {
        out.push_back(name == "items" ? Value::make_list({k, v}, true) : name == "keys" ? k : v);
      }
      return Value::make_list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function(name, [self](Interp&, Args& a) {
      ArgReader r{a, "get"};
      const Value* key = r.get(0, "key");
      if (!key) fail(ErrorKind::kType, "get expected at least 1 argument, got 0");
      if (const Value* v = self.lookup(*key)) return *v;
      const Value* def = r.get(1, "default");
      return def ? *def : Value::none();
    });
  }
  if (name == "copy") return Value::function(name, [self](Interp&, Args&) { return Value::make_dict(*self.dict); });
  if (name == "update" || name == "pop" || name == "popitem" || name == "setdefault" || name == "clear") {
    return unsafe_method(obj, name);
  }
  return Value::undefined();
}

Value list_method(const Value& obj, const std::string& name) {
  const Value self = obj;
  if (name == "index" || name == "count") {
    return Value::function(name, [self, name](Interp&, Args& a) {
      if (a.positional.empty()) fail(ErrorKind::kType, name + "() takes exactly one argument (0 given)");
      int64_t n = 0;
      for (size_t k = 0; k < self.list->size(); ++k) {
        if (!equals((*self.list)[k], a.positional[0])) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(k));
        ++n;
      }
      if (name == "index") fail(ErrorKind::kValue, to_repr(a.positional[0]) + " is not in list");
      return Value::integer(n);
    });
  }
  if (!obj.tuple && (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
                     name == "clear" || name == "sort" || name == "reverse")) {
    return unsafe_method(obj, name);
  }
  return Value::undefined();
}

Value make_tojson_style_and_dump(const Value& v, Args& a) {
  ArgReader r{a, "tojson"};
  JsonStyle style;
  style.ensure_ascii = r.flag(0, "ensure_ascii", false);
  const Value* indent = r.get(1, "indent");
  if (indent && !indent->is_none()) {
    style.has_indent = true;
    if (indent->is_string()) {
      style.indent = indent->s;
    } else if (indent->is_integral()) {
      const int64_t width = std::max<int64_t>(0, indent->as_int());
      reserve_bytes(static_cast<uint64_t>(width));
      style.indent = std::string(static_cast<size_t>(width), ' ');
    } else {
      fail(ErrorKind::kType, "tojson: indent must be an int or a string, got " + type_name(*indent));
    }
    style.item_sep = ",";
  }
  const Value* seps = r.get(2, "separators");
  if (seps && !seps->is_none()) {
    if (!seps->is_list() || seps->list->size() != 2 || !(*seps->list)[0].is_string() || !(*seps->list)[1].is_string()) {
      fail(ErrorKind::kType, "tojson: separators must be a pair of strings");
    }
    style.item_sep = (*seps->list)[0].s;
    style.key_sep = (*seps->list)[1].s;
  }
  style.sort_keys = r.flag(3, "sort_keys", false);
  return Value::string(to_json(v, style));
}

// The arguments from position `from` on, with every keyword: what format passes to
// percent_format and map/select pass on to the filter or test they apply.
Args args_from(const Args& a, size_t from) {
  Args rest;
  for (size_t k = from; k < a.positional.size(); ++k) rest.positional.push_back(a.positional[k]);
  rest.keywords = a.keywords;
  return rest;
}

}  // namespace

bool is_known_filter(const std::string& name) { return filter_names().count(name) > 0; }
bool is_known_test(const std::string& name) { return test_names().count(name) > 0; }

Value bound_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return string_method(obj, name);
  if (obj.is_dict()) return dict_method(obj, name);
  if (obj.is_list() && !obj.generator) return list_method(obj, name);
  return Value::undefined();
}

bool contains(const Value& container, const Value& item) {
  switch (container.type) {
    case Value::Type::kString:
      if (item.is_undefined()) fail_undefined(item);
      if (!item.is_string()) {
        fail(ErrorKind::kType, "'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.s.find(item.s) != std::string::npos;
    case Value::Type::kList:
      for (const Value& v : *container.list) {
        if (equals(v, item)) return true;
      }
      return false;
    case Value::Type::kDict: return container.lookup(item) != nullptr;
    case Value::Type::kUndefined: return false;
    default: fail(ErrorKind::kType, "argument of type '" + type_name(container) + "' is not iterable");
  }
}

bool Interp::test(const std::string& name, const Value& v, Args& a) {
  using T = Value::Type;
  ArgReader r{a, name.c_str()};
  auto arg = [&]() -> const Value& {
    const Value* x = r.get(0, "other");
    if (!x) fail(ErrorKind::kType, "test '" + name + "' needs an argument");
    return *x;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.type == T::kBool;
  if (name == "true") return v.type == T::kBool && v.b;
  if (name == "false") return v.type == T::kBool && !v.b;
  if (name == "integer") return v.type == T::kInt;
  if (name == "float") return v.type == T::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // Jinja's Undefined has __iter__, __len__ and __getitem__, so it passes these too.
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || (v.is_list() && !v.generator) || v.is_dict() || v.is_undefined();
  if (name == "callable") return v.type == T::kFunction || v.is_undefined();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    const std::string s = to_str(v);
    bool any = false;
    for (char32_t c : decode_utf8(s)) {
      if (!is_cased(c)) continue;
      any = true;
      if ((name == "lower") != (to_lower_cp(c) == c)) return false;
    }
    return any;
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_number()) fail(ErrorKind::kType, "unsupported operand type(s) for %: '" + type_name(v) + "' and 'int'");
    const int64_t d = name == "divisibleby" ? r.integer(0, "num", 1) : 2;
    if (d == 0) fail(ErrorKind::kValue, "integer division or modulo by zero");
    const double m = std::fmod(v.as_float(), static_cast<double>(d));
    return name == "odd" ? m != 0 : m == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg());
  if (name == "ne" || name == "!=") return !equals(v, arg());
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, arg());
  if (name == "le" || name == "<=") return equals(v, arg()) || less(v, arg());
  if (name == "gt" || name == "greaterthan" || name == ">") return less(arg(), v);
  if (name == "ge" || name == ">=") return equals(v, arg()) || less(arg(), v);
  if (name == "in") return contains(arg(), v);
  if (name == "sameas") {
    const Value& o = arg();
    if (v.type != o.type) return false;
    if (v.is_list()) return v.list == o.list;
    if (v.is_dict() || v.type == T::kNamespace) return v.dict == o.dict;
    return equals(v, o);
  }
  if (name == "filter") return v.is_string() && is_known_filter(v.s);
  if (name == "test") return v.is_string() && is_known_test(v.s);
  fail(ErrorKind::kSyntax, "No test named '" + name + "'.");
}

// Filters by family: each returns nothing for a name it does not have, and filter() tries
// them in turn, so an unknown name is refused in one place.
Value Interp::filter(const std::string& name, Value v, Args& a) {
  if (auto out = value_filter(name, v, a)) return *std::move(out);
  if (auto out = text_filter(name, v, a)) return *std::move(out);
  if (auto out = number_filter(name, v, a)) return *std::move(out);
  if (auto out = collection_filter(name, v, a)) return *std::move(out);
  if (auto out = per_item_filter(name, v, a)) return *std::move(out);
  if (auto out = aggregate_filter(name, v, a)) return *std::move(out);
  fail(ErrorKind::kSyntax, "No filter named '" + name + "'.");
}

// default, the conversions to text (string, safe, pprint, tojson), length and attr: they
// take any value.
std::optional<Value> Interp::value_filter(const std::string& name, const Value& v, Args& a) {
  using T = Value::Type;
  ArgReader r{a, name.c_str()};
  if (name == "default" || name == "d") {
    const bool boolean = r.flag(1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) {
      const Value* def = r.get(0, "default_value");
      return def ? *def : Value::string("");
    }
    return v;
  }
  if (name == "safe") return v.markup ? v : Value::make_markup(to_str(v));
  if (name == "string") return v.markup ? v : Value::string(to_str(v));
  if (name == "pprint") return Value::string(to_repr(v));
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value::integer(0);
    if (v.is_string()) return Value::integer(static_cast<int64_t>(code_point_count(v.s)));
    if (v.is_list() && !v.generator) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.is_dict() || v.type == T::kNamespace) return Value::integer(static_cast<int64_t>(v.dict->size()));
    fail(ErrorKind::kType, "object of type '" + type_name(v) + "' has no len()");
  }
  if (name == "tojson") return make_tojson_style_and_dump(v, a);
  if (name == "attr") return getattr(v, r.text(0, "name", ""));
  return std::nullopt;
}

// The string filters: the operand is read as text (to_str).
std::optional<Value> Interp::text_filter(const std::string& name, const Value& v, Args& a) {
  ArgReader r{a, name.c_str()};
  if (name == "trim") return Value::string(strip(to_str(v), r.get(0, "chars"), true, true));
  if (name == "upper") return Value::string(upper(to_str(v)));
  if (name == "lower") return Value::string(lower(to_str(v)));
  if (name == "capitalize") return Value::string(capitalize(to_str(v)));
  if (name == "title") {
    // Jinja capitalises after "-", whitespace and opening brackets.
    std::u32string u = decode_utf8(to_str(v));
    bool start = true;
    for (auto& c : u) {
      const bool boundary = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      if (boundary) {
        start = true;
        continue;
      }
      c = start ? to_upper_cp(c) : to_lower_cp(c);
      start = false;
    }
    return Value::string(encode_utf8(u));
  }
  if (name == "replace") {
    const Value* old_v = r.get(0, "old");
    const Value* new_v = r.get(1, "new");
    if (!old_v || !new_v) fail(ErrorKind::kType, "replace needs the old and the new string");
    return Value::string(replace(to_str(v), to_str(*old_v), to_str(*new_v), r.integer(2, "count", -1)));
  }
  if (name == "escape" || name == "e") return v.markup ? v : Value::make_markup(html_escape(to_str(v)));
  if (name == "forceescape") return Value::make_markup(html_escape(to_str(v)));
  if (name == "format") {
    Args rest = args_from(a, 0);
    if (rest.positional.size() == 1) return Value::string(percent_format(to_str(v), rest.positional[0]));
    return Value::string(percent_format(to_str(v), Value::make_list(rest.positional, true)));
  }
  if (name == "indent") {
    const Value* width = r.get(0, "width");
    std::string pad;
    if (width && width->is_string()) {
      pad = width->s;
    } else {
      const int64_t n = std::max<int64_t>(0, r.integer(0, "width", 4));
      reserve_bytes(static_cast<uint64_t>(n));
      pad = std::string(static_cast<size_t>(n), ' ');
    }
    const bool first = r.flag(1, "first", false);
    const bool blank = r.flag(2, "blank", false);
    std::vector<std::string> lines = splitlines(to_str(v) + "\n", false);
    std::string out;
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) out += "\n";
      if (k > 0 && (blank || !lines[k].empty())) out += pad;
      out += lines[k];
      reserve_bytes(out.size());
    }
    if (first) out = pad + out;
    return Value::string(out);
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : decode_utf8(to_str(v))) {
      const bool word = (c >= '0' && c <= '9') || c == '_' || is_cased(c) || (c >= 0x80 && !is_py_space(c));
      if (word && !in_word) ++n;
      in_word = word;
    }
    return Value::integer(n);
  }
  return std::nullopt;
}

// int, float, abs and round.
std::optional<Value> Interp::number_filter(const std::string& name, const Value& v, Args& a) {
  using T = Value::Type;
  ArgReader r{a, name.c_str()};
  if (name == "int") {
    const int64_t base = r.integer(1, "base", 10);
    if (v.is_integral()) return Value::integer(v.as_int());
    if (v.type == T::kFloat) {
      if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) fail(ErrorKind::kLimit, "int: value out of the 64-bit range");
      return Value::integer(static_cast<int64_t>(v.f));
    }
    if (v.is_string()) {
      int64_t out;
      if (parse_int(v.s, base, out)) return Value::integer(out);
      if (errno == ERANGE) fail(ErrorKind::kLimit, "int: '" + v.s.substr(0, 40) + "' is beyond 64 bits, which this renderer does not support");
      double d;
      if (parse_float(v.s, d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
    }
    const Value* def = r.get(0, "default");
    return def ? *def : Value::integer(0);
  }
  if (name == "float") {
    if (v.is_number()) return Value::number(v.as_float());
    double d;
    if (v.is_string() && parse_float(v.s, d)) return Value::number(d);
    const Value* def = r.get(0, "default");
    return def ? *def : Value::number(0.0);
  }
  if (name == "abs") {
    if (v.type == T::kFloat) return Value::number(std::fabs(v.f));
    if (v.is_integral()) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
    fail(ErrorKind::kType, "bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (name == "round") {
    if (!v.is_number()) fail(ErrorKind::kType, "type " + type_name(v) + " doesn't define __round__ method");
    const int64_t precision = r.integer(0, "precision", 0);
    const std::string method = r.text(1, "method", "common");
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_float() * scale;
    double rounded = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    if (method != "common" && method != "ceil" && method != "floor") {
      fail(ErrorKind::kValue, "method must be common, ceil or floor");
    }
    return Value::number(rounded / scale);
  }
  return std::nullopt;
}

// Dicts and sequences as a whole: items, dictsort, first/last, list, reverse, join.
std::optional<Value> Interp::collection_filter(const std::string& name, const Value& v, Args& a) {
  ArgReader r{a, name.c_str()};
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list({});
    if (!v.is_dict()) fail(ErrorKind::kType, "Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, item] : *v.dict) out.push_back(Value::make_list({k, item}, true));
    return Value::make_generator(std::move(out));
  }
  if (name == "dictsort") {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_dict()) fail(ErrorKind::kType, "dictsort: '" + type_name(v) + "' object has no attribute 'items'");
    const bool case_sensitive = r.flag(0, "case_sensitive", false);
    const std::string by = r.text(1, "by", "key");
    const bool reverse = r.flag(2, "reverse", false);
    if (by != "key" && by != "value") fail(ErrorKind::kValue, "You can only sort by either \"key\" or \"value\"");
    const size_t pos = by == "key" ? 0 : 1;
    List items;
    for (const auto& [k, item] : *v.dict) items.push_back(Value::make_list({k, item}, true));
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const Value kx = sort_key((*x.list)[pos], case_sensitive);
      const Value ky = sort_key((*y.list)[pos], case_sensitive);
      return reverse ? less(ky, kx) : less(kx, ky);
    });
    return Value::make_list(std::move(items));
  }
  if (name == "first" || name == "last") {
    if (name == "last" && v.generator) fail(ErrorKind::kType, "'generator' object is not reversible");
    List items = iterate(v);
    if (items.empty()) return Value::undefined(std::string("No ") + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::make_list(iterate(v));
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = decode_utf8(v.s);
      std::reverse(u.begin(), u.end());
      return Value::string(encode_utf8(u));
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "join") {
    const std::string sep = r.text(0, "d", "");
    const Value* attribute = r.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += to_str(attribute && !attribute->is_none() ? attr_path(*this, item, to_str(*attribute)) : item);
      if (out.size() > limits_.max_output_bytes) fail(ErrorKind::kLimit, "join: the text passed Limits::max_output_bytes");
      reserve_bytes(out.size());
    }
    return Value::string(out);
  }
  return std::nullopt;
}

// A filter, a test or an attribute applied to each item: map, select/reject(attr).
std::optional<Value> Interp::per_item_filter(const std::string& name, const Value& v, Args& a) {
  if (name == "map") {
    List out;
    const Value* attribute = nullptr;
    for (const auto& [k, item] : a.keywords) {
      if (k == "attribute") attribute = &item;
    }
    if (attribute && a.positional.empty()) {
      const Value* def = nullptr;
      for (const auto& [k, item] : a.keywords) {
        if (k == "default") def = &item;
      }
      for (const Value& item : v.truthy() ? iterate(v) : List{}) {
        Value got = attr_path(*this, item, to_str(*attribute));
        out.push_back(got.is_undefined() && def ? *def : got);
      }
      return Value::make_generator(std::move(out));
    }
    if (a.positional.empty()) fail(ErrorKind::kType, "map requires a filter argument");
    const std::string filter_name = to_str(a.positional[0]);
    if (!is_known_filter(filter_name)) fail(ErrorKind::kSyntax, "No filter named '" + filter_name + "'.");
    for (const Value& item : v.truthy() ? iterate(v) : List{}) {
      Args rest = args_from(a, 1);
      out.push_back(filter(filter_name, item, rest));
    }
    return Value::make_generator(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool attr = name == "selectattr" || name == "rejectattr";
    const bool keep = name == "select" || name == "selectattr";
    size_t next = 0;
    std::string attribute;
    if (attr) {
      if (a.positional.empty()) fail(ErrorKind::kType, name + " needs an attribute name");
      attribute = to_str(a.positional[next++]);
    }
    std::string test_name;
    if (next < a.positional.size()) test_name = to_str(a.positional[next++]);
    if (!test_name.empty() && !is_known_test(test_name)) fail(ErrorKind::kSyntax, "No test named '" + test_name + "'.");
    List out;
    // Jinja's select/reject iterate only `if seq`: None (a missing key's default) selects nothing.
    for (const Value& item : v.truthy() ? iterate(v) : List{}) {
      const Value subject = attr ? attr_path(*this, item, attribute) : item;
      bool passed;
      if (test_name.empty()) {
        passed = subject.truthy();
      } else {
        Args rest = args_from(a, next);
        passed = test(test_name, subject, rest);
      }
      if (passed == keep) out.push_back(item);
    }
    return Value::make_generator(std::move(out));
  }
  return std::nullopt;
}

// The items ordered, deduplicated or summed, by an optional attribute: sort, unique, min, max,
// sum.
std::optional<Value> Interp::aggregate_filter(const std::string& name, const Value& v, Args& a) {
  ArgReader r{a, name.c_str()};
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    const bool reverse = name == "sort" && r.flag(0, "reverse", false);
    const bool case_sensitive = name == "sort" ? r.flag(1, "case_sensitive", false) : r.flag(0, "case_sensitive", false);
    const Value* attribute = name == "sort" ? r.get(2, "attribute") : r.get(1, "attribute");
    auto key = [&](const Value& item) {
      Value k = attribute && !attribute->is_none() ? attr_path(*this, item, to_str(*attribute)) : item;
      return sort_key(k, case_sensitive);
    };
    List items = iterate(v);
    if (name == "sort") {
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return reverse ? less(key(y), key(x)) : less(key(x), key(y));
      });
      return Value::make_list(std::move(items));
    }
    if (name == "unique") {
      List out;
      List seen;
      for (const Value& item : items) {
        const Value k = key(item);
        charge_steps(seen.size() >> 4);  // a linear scan per item: quadratic on a huge list
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
          seen.push_back(k);
          out.push_back(item);
        }
      }
      return Value::make_generator(std::move(out));
    }
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    for (size_t k = 1; k < items.size(); ++k) {
      if (name == "min" ? less(key(items[k]), key(items[best])) : less(key(items[best]), key(items[k]))) best = k;
    }
    return items[best];
  }
  if (name == "sum") {
    const Value* attribute = r.get(0, "attribute");
    const Value* start = r.get(1, "start");
    Value total = start ? *start : Value::integer(0);
    for (const Value& item : iterate(v)) {
      total = binary("+", total, attribute && !attribute->is_none() ? attr_path(*this, item, to_str(*attribute)) : item);
    }
    return total;
  }
  return std::nullopt;
}

void add_globals(Frame& globals) {
  globals.set("range", Value::function("range", [](Interp&, Args& a) {
    int64_t start = 0;
    int64_t stop = 0;
    int64_t step = 1;
    auto num = [&](size_t k) {
      if (!a.positional[k].is_integral()) {
        fail(ErrorKind::kType, "'" + type_name(a.positional[k]) + "' object cannot be interpreted as an integer");
      }
      return a.positional[k].as_int();
    };
    if (a.positional.size() == 1) {
      stop = num(0);
    } else if (a.positional.size() == 2 || a.positional.size() == 3) {
      start = num(0);
      stop = num(1);
      if (a.positional.size() == 3) step = num(2);
    } else {
      fail(ErrorKind::kType, "range expected 1 to 3 arguments, got " + std::to_string(a.positional.size()));
    }
    if (step == 0) fail(ErrorKind::kValue, "range() arg 3 must not be zero");
    List out;
    if (int64_t span = 0; !__builtin_sub_overflow(stop, start, &span)) {
      out.reserve(static_cast<size_t>(std::min<int64_t>(100000, std::max<int64_t>(0, span / step + 1))));
    }
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (out.size() >= 100000) {
        fail(ErrorKind::kLimit, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      }
      out.push_back(Value::integer(k));
    }
    return Value::make_list(std::move(out));
  }));
  auto from_args = [](Args& a, const char* what) {
    Dict items;
    if (!a.positional.empty()) {
      if (a.positional.size() > 1 || !a.positional[0].is_dict()) {
        fail(ErrorKind::kType, std::string(what) + "() takes a mapping and keyword arguments");
      }
      items = *a.positional[0].dict;
    }
    for (auto& [k, v] : a.keywords) {
      bool replaced = false;
      for (auto& [ek, ev] : items) {
        if (ek.is_string() && ek.s == k) {
          ev = v;
          replaced = true;
        }
      }
      if (!replaced) items.emplace_back(Value::string(k), v);
    }
    return items;
  };
  globals.set("dict", Value::function("dict", [from_args](Interp&, Args& a) { return Value::make_dict(from_args(a, "dict")); }));
  globals.set("namespace", Value::function("namespace", [from_args](Interp&, Args& a) {
    Dict items = from_args(a, "namespace");
    for (const auto& [k, v] : items) {
      if (k.is_string() && !k.s.empty() && k.s[0] == '_') {
        fail(ErrorKind::kSecurity, "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                                       k.s + "'. Please rename the attribute.");
      }
    }
    return Value::make_namespace(std::move(items));
  }));
  globals.set("raise_exception", Value::function("raise_exception", [](Interp&, Args& a) -> Value {
    fail(ErrorKind::kRaised, a.positional.empty() ? std::string() : to_str(a.positional[0]));
  }));
  globals.set("strftime_now", Value::function("strftime_now", [](Interp& in, Args& a) {
    if (a.positional.empty() || !a.positional[0].is_string()) fail(ErrorKind::kType, "strftime_now(format) needs a format string");
    const std::time_t now = in.now_seconds != 0 ? static_cast<std::time_t>(in.now_seconds) : std::time(nullptr);
    std::tm local{};
    if (in.now_seconds != 0) {
      gmtime_r(&now, &local);
    } else {
      localtime_r(&now, &local);
    }
    char buf[512];
    const size_t n = std::strftime(buf, sizeof buf, a.positional[0].s.c_str(), &local);
    return Value::string(std::string(buf, n));
  }));
}

}  // namespace rne::chat::detail

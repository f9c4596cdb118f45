// The interpreter's values: Python's objects as Jinja templates see them (Undefined, None, bool,
// int, float, str, list/tuple, dict, namespace, callables), with Python's str()/repr()/json.dumps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rne/chat/result.h"

namespace rne::chat::detail {

// Thrown inside the interpreter only; Template::render turns it into an Error value.
struct Fail {
  ErrorKind kind;
  std::string message;
  int line = 0;
  int column = 0;
};
[[noreturn]] void fail(ErrorKind kind, std::string message);

// One render's budget (Limits::max_steps, max_alloc_bytes, max_render_ms), reached through a
// thread-local pointer so that value constructors and builtins charge it too, not only the
// evaluator: a hostile template's cost is often one builtin call over a huge value.
struct Budget {
  size_t max_steps = 0;
  size_t max_bytes = 0;
  size_t max_value_bytes = 0;
  int max_ms = 0;
  size_t steps = 0;
  size_t bytes = 0;
  int64_t deadline_ns = 0;  // steady clock; 0: none
};
// Installs `budget` for the current thread while in scope (renders nest: a previous one is kept).
class BudgetScope {
 public:
  explicit BudgetScope(Budget& budget);
  ~BudgetScope();
  BudgetScope(const BudgetScope&) = delete;
  BudgetScope& operator=(const BudgetScope&) = delete;

 private:
  Budget* previous_;
};
// kLimit errors naming the limit once a render passes it; no-ops outside a render.
void charge_steps(size_t n);
void charge_bytes(size_t n);
// A kLimit error when a value of `n` bytes would pass Limits::max_value_bytes or max_alloc_bytes,
// charging nothing: checked before building a value whose size is known (or while one grows), so
// the value is never built.
void reserve_bytes(size_t n);

struct Value;
struct Args;
class Interp;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<Value, Value>>;  // insertion-ordered, as Python's dict
using Function = std::function<Value(Interp&, Args&)>;

struct Value {
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };
  Type type = Type::kUndefined;
  bool b = false;
  bool tuple = false;  // a kList that Python would hold as a tuple (repr uses parentheses)
  // A kList that Jinja's filters return as a Python generator (map, select, reject, selectattr,
  // rejectattr, unique, items): always true, no len(), no index, not JSON serializable.
  bool generator = false;
  bool markup = false;  // a kString that is markupsafe's Markup (`| safe`, `| escape`): `+` escapes the other side
  uint16_t depth = 0;  // list/dict nesting below this value (bounded: printing, comparing and
                       // freeing values recurse)
  int64_t i = 0;
  double f = 0;
  std::string s;  // kString: the text (UTF-8); kUndefined: the message an error would carry
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;  // kDict and kNamespace (a namespace is shared, so mutable)
  std::shared_ptr<Function> fn;
  std::string fn_name;

  static Value undefined(std::string why = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(List items, bool is_tuple = false);
  static Value make_generator(List items);
  static Value make_markup(std::string text);
  static Value make_dict(Dict items);
  static Value make_namespace(Dict items);
  static Value function(std::string name, Function fn);

  // An Undefined from an attribute the sandbox refuses (__class__, __globals__...): using it is a
  // SecurityError rather than an UndefinedError, as in Jinja's sandbox.
  static Value unsafe(std::string why);

  bool is_undefined() const { return type == Type::kUndefined; }
  bool is_none() const { return type == Type::kNone; }
  bool is_string() const { return type == Type::kString; }
  bool is_list() const { return type == Type::kList; }
  bool is_dict() const { return type == Type::kDict; }
  bool is_number() const { return type == Type::kInt || type == Type::kFloat || type == Type::kBool; }
  bool is_integral() const { return type == Type::kInt || type == Type::kBool; }
  int64_t as_int() const { return type == Type::kBool ? (b ? 1 : 0) : i; }
  double as_float() const { return type == Type::kFloat ? f : static_cast<double>(as_int()); }

  bool truthy() const;
  // The value stored under `key` (dict or namespace), or nullptr.
  const Value* lookup(const Value& key) const;
  const Value* lookup(const std::string& key) const;
};

// The error of using an Undefined where a value is needed.
[[noreturn]] void fail_undefined(const Value& v);

// The deepest nesting of lists and dicts a value may have (a kLimit error beyond).
constexpr uint16_t kMaxValueDepth = 512;

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// Python's equality (1 == 1.0 == True; lists/dicts deeply; Undefined equals only Undefined).
bool equals(const Value& a, const Value& b);
// Python's <; a TypeError for unorderable types.
bool less(const Value& a, const Value& b);
// str(value) and repr(value); Undefined prints as "".
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
std::string python_float(double d);
// "dict object", "None", "str object": Jinja's object_type_repr for Undefined messages.
std::string type_repr(const Value& v);
// Python's type name for TypeErrors: "str", "int", "NoneType", ...
std::string type_name(const Value& v);
// json.dumps(v, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
struct JsonStyle {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style);
// markupsafe.escape() of text: & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

// UTF-8 helpers over code points (Python's str indexes code points).
std::u32string decode_utf8(const std::string& s);
std::string encode_utf8(const std::u32string& s);
bool is_py_space(char32_t c);
size_t code_point_count(const std::string& s);

}  // namespace rne::chat::detail

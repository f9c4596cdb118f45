// rne_json: the one JSON reader and writer of the C++ core. A small DOM parser, enough for
// Hugging Face tokenizer.json files (the tokenizer), JSON Schemas (the grammar) and the host
// tools' config files.
//
// Written here rather than vendored so the core builds with nothing but a C++17
// compiler on every platform (host, iOS, Android). Objects keep their key order; lookups are
// linear, which is fine for the small config objects (the big vocab object is only iterated).
// Values are a std::variant (~40 bytes) because a 262k-entry vocab plus merges makes a million
// of them while loading.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "rne/base/result.h"

namespace rne::json {

class Value;
using Array = std::vector<Value>;
using Member = std::pair<std::string, Value>;
using Object = std::vector<Member>;

class Value {
 public:
  Value() = default;
  explicit Value(bool b) : data_(b) {}
  explicit Value(double d) : data_(d) {}
  explicit Value(std::string s) : data_(std::move(s)) {}
  explicit Value(Array a) : data_(std::move(a)) {}
  explicit Value(Object o) : data_(std::move(o)) {}

  bool is_null() const { return std::holds_alternative<std::monostate>(data_); }
  bool is_bool() const { return std::holds_alternative<bool>(data_); }
  bool is_number() const { return std::holds_alternative<double>(data_); }
  bool is_string() const { return std::holds_alternative<std::string>(data_); }
  bool is_array() const { return std::holds_alternative<Array>(data_); }
  bool is_object() const { return std::holds_alternative<Object>(data_); }
  // True when this is a number holding an integer that fits in int64 (ids, counts).
  bool is_integer() const;

  // Accessors; call only after checking the type.
  bool as_bool() const { return std::get<bool>(data_); }
  double as_number() const { return std::get<double>(data_); }
  int64_t as_integer() const { return static_cast<int64_t>(std::get<double>(data_)); }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const Array& as_array() const { return std::get<Array>(data_); }
  const Object& as_object() const { return std::get<Object>(data_); }
  Object& as_object() { return std::get<Object>(data_); }

  // Member lookup on an object; nullptr when absent or when this is not an object.
  const Value* find(std::string_view key) const;

  // "null", "bool", "number", "string", "array" or "object", for error messages.
  const char* type_name() const;

 private:
  std::variant<std::monostate, bool, double, std::string, Array, Object> data_;
};

// Python's `object[key] = value`: a key already there keeps its place and takes the value; a new
// one is appended.
void set(Object& object, const std::string& key, Value value);

enum class ErrorCode {
  kSyntax,   // not JSON (the message says what was expected)
  kTooDeep,  // arrays and objects nested past kMaxDepth
};

// The base Error (rne/base/result.h) with where in the input it was found.
struct ParseError : base::Error<ErrorCode> {
  size_t offset = 0;  // byte offset into the input
};

// Parses a complete JSON document.
base::Result<Value, ParseError> parse(std::string_view text);

// How write_string escapes beyond what JSON requires (", \\ and control characters).
struct StringStyle {
  // Python's json.dumps: \\b and \\f rather than \\u0008 and \\u000c, and the text read as
  // code points (next_code_point), so that with ensure_ascii every code point past '~' is a
  // \\uXXXX escape (a surrogate pair past U+FFFF). Otherwise the bytes past ASCII are copied.
  bool python = false;
  bool ensure_ascii = false;  // json.dumps(ensure_ascii=True); only with python
};

// Appends `s` (UTF-8) to `out` as a quoted, escaped JSON string literal: the one JSON string
// writer of the core (the grammar's literals, the CLIs' output, the chat templates' tojson).
void write_string(std::string_view s, std::string& out, const StringStyle& style = {});

// The code point of the UTF-8 sequence at `pos`, advancing `pos` past it. A byte that starts no
// whole sequence reads as U+FFFD and advances by one; continuation bytes are not checked (text
// is checked where it enters).
uint32_t next_code_point(std::string_view s, size_t& pos);

// Appends the UTF-8 encoding of code point `cp` to `out` (what a \u escape decodes to).
void append_utf8(uint32_t cp, std::string& out);

}  // namespace rne::json

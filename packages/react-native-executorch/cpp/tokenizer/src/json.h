// A small DOM JSON parser, enough for Hugging Face tokenizer.json files.
//
// Written here rather than vendored so the tokenizer builds with nothing but a C++17
// compiler on every platform (host, iOS, Android). Objects keep their key order; lookups are
// linear, which is fine for the small config objects (the big vocab object is only iterated).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rne::tokenizer::json {

class Value {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, Value>;

  Value() = default;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  // True when the number is an integer that fits in int64 (ids, counts).
  bool is_integer() const;
  int64_t as_integer() const { return static_cast<int64_t>(number_); }
  const std::string& as_string() const { return string_; }
  const std::vector<Value>& as_array() const { return array_; }
  const std::vector<Member>& as_object() const { return object_; }

  // Member lookup on an object; nullptr when absent or when this is not an object.
  const Value* find(std::string_view key) const;

  static Value make_null() { return Value(); }
  static Value make_bool(bool b);
  static Value make_number(double d);
  static Value make_string(std::string s);
  static Value make_array(std::vector<Value> items);
  static Value make_object(std::vector<Member> members);

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0.0;
  std::string string_;
  std::vector<Value> array_;
  std::vector<Member> object_;
};

struct ParseError {
  size_t offset = 0;  // byte offset into the input
  std::string message;
};

// Parses a complete JSON document. On failure returns false and fills `error`.
bool parse(std::string_view text, Value& out, ParseError& error);

// Appends `s` to `out` as a JSON string literal (quoted, escaped; UTF-8 passes through, invalid
// UTF-8 bytes are written as \u00XX so the output is always valid JSON).
void write_string(std::string_view s, std::string& out);

}  // namespace rne::tokenizer::json

// Errors as values for the tokenizer's public API: no exception crosses it.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace rne::tokenizer {

enum class ErrorCode {
  kFileNotFound,  // the tokenizer file does not exist or cannot be opened
  kIo,            // reading failed part-way
  kInvalidJson,   // not a JSON document
  kInvalidTokenizer,  // JSON, but not a well-formed tokenizer.json (missing/ill-typed field)
  kUnsupported,   // a well-formed tokenizer.json using a component this library does not implement
};

const char* to_string(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;  // says what is wrong, where, and what to do
};

template <typename T>
class Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : data_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }

  // Call only when ok() / !ok() respectively.
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  const Error& error() const { return std::get<Error>(data_); }

 private:
  std::variant<T, Error> data_;
};

}  // namespace rne::tokenizer

// Errors as values for the runner's public API: every fallible call returns Result<T>, and
// nothing throws across it (the JSI binding and the CLI turn an Error into their own form).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace rne::runner {

enum class ErrorCode {
  kInvalidArgument,   // a bad option or input from the caller
  kNotFound,          // a file that does not exist or cannot be read
  kInvalidModel,      // not a .pte, or a .pte that breaks the exporter <-> runner contract
  kTokenizer,         // the tokenizer failed to load or to encode/decode
  kContextFull,       // the prompt does not fit in the KV cache
  kExecutionFailed,   // the ExecuTorch runtime returned an error
  kBusy,              // generate() called while another generate() runs
  kInsufficientMemory,  // a load the system does not have the memory for (seam memory_guard.h)
};

// A short machine-readable name ("context_full"), stable for bindings and logs.
const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;  // says what is wrong and, where there is one, what to do about it
};

// Either a value or an Error. Kept deliberately small: ok(), value(), error(), and `*`/`->`.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}           // NOLINT(google-explicit-constructor)
  Result(Error error) : state_(std::move(error)) {}       // NOLINT(google-explicit-constructor)

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  const Error& error() const { return std::get<1>(state_); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Error> state_;
};

// Result of an operation that produces nothing but may fail.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_{ErrorCode::kInvalidArgument, ""};
  bool ok_ = true;
};

}  // namespace rne::runner

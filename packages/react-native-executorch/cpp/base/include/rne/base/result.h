// Errors as values, the one form every library of the C++ core uses: a fallible call returns
// Result<T, E>, and no exception crosses a public API (the JSI binding, the Node addon and the
// CLIs turn an error into their own form). Each library names its failures with its own code
// enum and spells its types as aliases of these:
//   using Error = base::Error<ErrorCode>;
//   template <typename T> using Result = base::Result<T, Error>;
// A library whose errors carry more than a code and a message (the chat templates' line and
// column) passes its own error struct as E.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace rne::base {

template <typename Code>
struct Error {
  Code code;
  std::string message;  // says what is wrong and, where there is one, what to do about it
};

// Either a value or an error. Kept deliberately small: ok(), value(), error(), and `*`/`->`.
template <typename T, typename E>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(E error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Call only when ok() / !ok() respectively.
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  const E& error() const { return std::get<1>(state_); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, E> state_;
};

// The result of an operation that produces nothing but may fail.
template <typename E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const E& error() const { return *error_; }

 private:
  std::optional<E> error_;
};

}  // namespace rne::base

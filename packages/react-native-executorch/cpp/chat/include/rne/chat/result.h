// Errors as values for the chat template library (rne/base/result.h): a template that does not
// parse or fails while rendering is an Error naming the template line and column, never an
// exception or a crash. Its Error is the base one (code, message) with that location added.
#pragma once

#include <string>

#include "rne/base/result.h"

namespace rne::chat {

enum class ErrorKind {
  kNotFound,     // no template file, or no chat template in the model directory
  kInvalidFile,  // a tokenizer_config.json that is not JSON, or a template entry of a wrong type
  kInvalidInput, // messages/options of the wrong shape (not the template's own check)
  kSyntax,       // the template does not parse (Python: TemplateSyntaxError)
  kUndefined,    // a missing variable/attribute used where a value is needed (UndefinedError)
  kRaised,       // the template's own raise_exception(message) (TemplateError)
  kType,         // an operation on the wrong types, e.g. "a" + 1 (TypeError)
  kValue,        // a bad value, e.g. int("x"), division by zero (ValueError/ZeroDivisionError)
  kSecurity,     // what the sandbox forbids: mutating methods, "_"-prefixed namespace names
  kLimit,        // a size/depth/step limit of this renderer (hostile or runaway templates)
};

// The Python exception name for kinds that mirror one ("UndefinedError"), else a short name.
const char* error_kind_name(ErrorKind kind);

struct Error : base::Error<ErrorKind> {
  int line = 0;    // 1-based template line of the failing tag or expression; 0: unknown
  int column = 0;  // 1-based byte column on that line; 0: unknown

  // "UndefinedError: 'dict object' has no attribute 'name' (template line 3, column 12)".
  std::string to_string() const;
};

template <typename T>
using Result = base::Result<T, Error>;

}  // namespace rne::chat

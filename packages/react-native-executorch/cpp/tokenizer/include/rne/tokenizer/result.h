// The tokenizer's errors (rne/base/result.h): no exception crosses its public API.
#pragma once

#include "rne/base/result.h"

namespace rne::tokenizer {

enum class ErrorCode {
  kFileNotFound,  // the tokenizer file does not exist or cannot be opened
  kIo,            // reading failed part-way
  kInvalidJson,   // not a JSON document
  kInvalidTokenizer,  // JSON, but not a well-formed tokenizer.json (missing/ill-typed field)
  kUnsupported,   // a well-formed tokenizer.json using a component this library does not implement
};

const char* to_string(ErrorCode code);

using Error = base::Error<ErrorCode>;

template <typename T>
using Result = base::Result<T, Error>;

}  // namespace rne::tokenizer

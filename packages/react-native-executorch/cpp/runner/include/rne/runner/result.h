// The runner's errors (rne/base/result.h): every fallible call of its public API returns
// Result<T>, and nothing throws across it (the JSI binding and the CLI turn an Error into their
// own form).
#pragma once

#include "rne/base/result.h"

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

using Error = base::Error<ErrorCode>;

template <typename T>
using Result = base::Result<T, Error>;

}  // namespace rne::runner

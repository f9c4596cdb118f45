#include "rne/runner/result.h"

namespace rne::runner {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kInvalidModel: return "invalid_model";
    case ErrorCode::kTokenizer: return "tokenizer";
    case ErrorCode::kContextFull: return "context_full";
    case ErrorCode::kExecutionFailed: return "execution_failed";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kInsufficientMemory: return "insufficient_memory";
  }
  return "unknown";
}

}  // namespace rne::runner

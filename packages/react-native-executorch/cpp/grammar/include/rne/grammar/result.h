// The grammar's errors are the runner's (rne/runner/result.h): a constraint's error reaches the
// caller of the runner's generate() as it is.
#pragma once

#include "rne/runner/result.h"

namespace rne::grammar {

using runner::Error;
using runner::ErrorCode;
using runner::Result;

}  // namespace rne::grammar

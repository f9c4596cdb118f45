// A check of a .pte's program before ExecuTorch turns it into a Method. FlatBuffer verification
// proves every offset lands inside the buffer, but not that what the program stores holds
// together: ExecuTorch 1.5 trusts value, operator, delegate and jump indices, argument types and
// counts, and aborts or reads wild memory on a damaged one (method.cpp get_value's ET_CHECK, a
// kernel wrapper's toTensor(), XNNPACK indexing past a short argument list). This reads only the
// program's tables (values, instructions, operators, delegates, segments, and an XNNPACK
// delegate's header), never the weights, with its own bounds-checked FlatBuffer reader, so it is
// safe on any bytes and costs well under a millisecond even for a multi-GB file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "rne/runner/result.h"

namespace rne::runner {

// Checks the program of the .pte held in [data, data + size) (the whole file: its FlatBuffer,
// the extended header that sizes it and the segments after it). Errors: kInvalidModel, whose
// message names `path`, the first index found out of range and where, and says that the file is
// a corrupt file to download or export again.
Result<void> check_program(const uint8_t* data, size_t size, const std::string& path);

}  // namespace rne::runner

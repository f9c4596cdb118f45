// Opening the files a user names (a .pte, tokenizer.json, tokenizer_config.json, a JSON Schema,
// an export report). Regular files only: the path is opened with O_NONBLOCK, so a FIFO or a
// device never blocks the open, and the descriptor (not the path, which can change in between)
// is checked to be a regular file. Reads are bounded: a file larger than its caller's limit is
// refused before anything is allocated for it.
#pragma once

#include <cstddef>
#include <string>

#include "rne/base/result.h"

namespace rne::json {

enum class FileError {
  kMissing,     // no such file (or a dangling symlink)
  kNotRegular,  // a directory, FIFO, socket or device
  kTooLarge,    // larger than the caller's limit
  kUnreadable,  // permission denied, an I/O error, or it shrank while being read
};

// The message names the path and what is wrong; the caller adds what the file is for.
using FileProblem = base::Error<FileError>;
template <typename T>
using FileResult = base::Result<T, FileProblem>;

// A read-only descriptor of the regular file at `path` (blocking mode restored, close-on-exec).
FileResult<int> open_regular_file(const std::string& path);

// The whole regular file at `path`. A file over `max_bytes` is kTooLarge, naming the limit.
FileResult<std::string> read_regular_file(const std::string& path, size_t max_bytes);

}  // namespace rne::json

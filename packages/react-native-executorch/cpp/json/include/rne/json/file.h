// Opening the files a user names (a .pte, tokenizer.json, tokenizer_config.json, a JSON Schema,
// an export report). Regular files only: the path is opened with O_NONBLOCK, so a FIFO or a
// device never blocks the open, and the descriptor (not the path, which can change in between)
// is checked to be a regular file. Reads are bounded: a file larger than its caller's limit is
// refused before anything is allocated for it.
#pragma once

#include <cstddef>
#include <string>

namespace rne::json {

enum class FileError {
  kNone,
  kMissing,     // no such file (or a dangling symlink)
  kNotRegular,  // a directory, FIFO, socket or device
  kTooLarge,    // larger than the caller's limit
  kUnreadable,  // permission denied, an I/O error, or it shrank while being read
};

struct FileProblem {
  FileError error = FileError::kNone;
  std::string message;  // names the path and what is wrong; the caller adds what the file is for
};

// A read-only descriptor of the regular file at `path` (blocking mode restored, close-on-exec),
// or -1 with `problem` filled in.
int open_regular_file(const std::string& path, FileProblem& problem);

// Reads the whole regular file at `path` into `text`. A file over `max_bytes` is kTooLarge,
// naming the limit. False with `problem` filled in on any failure.
bool read_regular_file(const std::string& path, size_t max_bytes, std::string& text,
                       FileProblem& problem);

}  // namespace rne::json

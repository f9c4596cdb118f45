// Reading an input file (image, audio) whole, with the errors both decoders give.
#pragma once

#include <cstddef>
#include <string>

#include "rne/json/file.h"
#include "rne/runner/result.h"

namespace rne::media::detail {

// The bytes of the regular file at `path`, at most `max_bytes`: kNotFound naming the problem
// where it cannot be read, kInvalidArgument with `too_large_hint` where it is larger. `kind`
// names the file in the message ("image", "audio").
inline runner::Result<std::string> read_media_file(const std::string& path, size_t max_bytes,
                                                   const char* kind,
                                                   const char* too_large_hint) {
  auto bytes = json::read_regular_file(path, max_bytes);
  if (!bytes.ok()) {
    const bool too_large = bytes.error().code == json::FileError::kTooLarge;
    return runner::Error{too_large ? runner::ErrorCode::kInvalidArgument
                                   : runner::ErrorCode::kNotFound,
                         std::string("cannot open the ") + kind + " file: " +
                             bytes.error().message +
                             (too_large ? std::string(" (") + too_large_hint + ")" : "")};
  }
  return std::move(bytes).value();
}

}  // namespace rne::media::detail

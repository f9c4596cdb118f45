// What the encoder CLIs (rne_vision, rne_audio) share: their error exit, the encoder call timed,
// and the embeddings written as raw float32 rows.
#pragma once

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "rne/runner/embeddings.h"
#include "rne/runner/result.h"

namespace rne::host {

// Prints "error: <code>: <message>" on stderr; the CLIs' exit status for a failed run.
inline int fail(const runner::Error& error) {
  std::fprintf(stderr, "error: %s: %s\n", runner::error_code_name(error.code),
               error.message.c_str());
  return 2;
}

// `encode()` and the milliseconds it took.
template <typename Encode>
auto timed(Encode&& encode) {
  const auto start = std::chrono::steady_clock::now();
  auto result = std::forward<Encode>(encode)();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return std::make_pair(std::move(result), ms);
}

// Writes the rows to `path` ([num_tokens, hidden] float32, native byte order).
inline runner::Result<void> write_rows(const runner::Embeddings& embeddings, const char* path) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(embeddings.values.data()),
            static_cast<std::streamsize>(embeddings.values.size() * sizeof(float)));
  if (!out) {
    return runner::Error{runner::ErrorCode::kNotFound,
                         std::string("cannot write ") + path +
                             ": check the directory exists and is writable"};
  }
  return {};
}

}  // namespace rne::host

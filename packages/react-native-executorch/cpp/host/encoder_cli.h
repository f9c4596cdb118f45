// What the encoder CLIs (rne_vision, rne_audio) share: their command line
// (`NAME ENCODER.pte INPUT OUT.f32`), the encoder loaded, their error exit, the encoder call
// timed, and the embeddings written as raw float32 rows before the JSON line is printed.
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

// What an encoder CLI's run makes of its input: the embeddings and its one JSON output line.
struct Encoded {
  runner::Embeddings embeddings;
  std::string json_line;
};

// The main() of an encoder CLI: checks the command line, loads ENCODER.pte as `Encoder`, calls
// `run(encoder, INPUT)` (-> runner::Result<Encoded>), writes the embeddings to OUT.f32 and
// prints the JSON line. Exit status: 0, 2 for a failed run, 64 for bad usage.
template <typename Encoder, typename Run>
int encoder_main(int argc, char** argv, const char* name, const char* input, Run&& run) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ENCODER.pte %s OUT.f32\n", name, input);
    return 64;
  }
  auto encoder = Encoder::load(argv[1]);
  if (!encoder.ok()) return fail(encoder.error());
  runner::Result<Encoded> encoded = std::forward<Run>(run)(**encoder, argv[2]);
  if (!encoded.ok()) return fail(encoded.error());
  if (auto written = write_rows(encoded->embeddings, argv[3]); !written.ok()) {
    return fail(written.error());
  }
  std::printf("%s\n", encoded->json_line.c_str());
  return 0;
}

}  // namespace rne::host

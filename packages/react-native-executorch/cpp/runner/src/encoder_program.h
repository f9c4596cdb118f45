// The one loader of the encoder programs (VisionEncoder, AudioEncoder): opening a .pte written
// by tools/export_encoder.py with the checks ModelSession makes, the errors that name the file
// and what to do, reading the integer constant methods that carry the program's contract, and
// the embeddings an encoder method returns.
#pragma once

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "rne/runner/embeddings.h"
#include "rne/runner/model_file.h"
#include "rne/runner/result.h"

#include <executorch/extension/module/module.h>

namespace rne::runner::detail {

// `kind` names the program in errors ("vision encoder"); `export_hint` is how to get a good one.
struct EncoderKind {
  const char* kind;
  const char* export_hint;
};

// A program that is not the encoder it should be: kInvalidModel naming the file.
Error encoder_contract_error(const EncoderKind& kind, const std::string& path,
                             const std::string& what);

// A runtime failure while parsing or loading: kInvalidModel naming the file and the stage.
Error encoder_runtime_failure(const std::string& path, const std::string& stage,
                              ::executorch::runtime::Error error);

// A method that failed while running: kExecutionFailed.
Error encoder_execution_failure(const std::string& path, const std::string& method,
                                ::executorch::runtime::Error error);

struct OpenedEncoder {
  std::unique_ptr<::executorch::extension::module::Module> module;
  bool has_backend_code = false;
};

// Checks `file` is a whole, sound .pte with every method in `methods`, and loads those methods.
// Throws what the runtime throws on a damaged count (callers guard with guarded_load).
Result<OpenedEncoder> open_encoder(const EncoderKind& kind, std::shared_ptr<const ModelFile> file,
                                   std::initializer_list<const char*> methods);

// A field of the program's contract and the integer constant method that holds it.
struct IntConstant {
  int64_t* field;
  const char* method;
};

// Reads each constant into its field, in order, then `get_backend` into `backend_code` where the
// exporter wrote it (`has_backend_code`; it stays -1 otherwise).
Result<void> read_int_constants(const EncoderKind& kind,
                                ::executorch::extension::module::Module& module,
                                const std::string& path,
                                std::initializer_list<IntConstant> constants,
                                bool has_backend_code, int64_t& backend_code);

// The first `rows` rows of a method's float32 output of `total_rows` x `width` values, as the
// embeddings of `rows` tokens. Errors: an output of another size (kInvalidModel), a non-finite
// value (damaged weights, kExecutionFailed).
Result<Embeddings> output_embeddings(const EncoderKind& kind, const std::string& path,
                                     const char* method, const ::executorch::aten::Tensor& output,
                                     int64_t total_rows, int64_t rows, int64_t width);

// Encoder::load(file): opens `file` as `kind` with `methods` (open_encoder), then `finish(file,
// opened)` makes the encoder and reads its contract; nothing escapes (guarded_load).
template <typename Finish>
auto load_encoder(const EncoderKind& kind, std::shared_ptr<const ModelFile> file,
                  std::initializer_list<const char*> methods, Finish&& finish)
    -> decltype(finish(file, std::declval<OpenedEncoder&>())) {
  const std::string path = file->path();
  return guarded_load(path, [&]() -> decltype(finish(file, std::declval<OpenedEncoder&>())) {
    auto opened = open_encoder(kind, file, methods);
    if (!opened.ok()) return opened.error();
    return finish(std::move(file), *opened);
  });
}

// Encoder::load(path): the file memory-mapped (ModelFile::Hold::kMapped), then
// Encoder::load(file).
template <typename Encoder>
Result<std::unique_ptr<Encoder>> load_mapped(const std::string& path) {
  auto file = ModelFile::open(path, ModelFile::Hold::kMapped);
  if (!file.ok()) return file.error();
  return Encoder::load(std::move(file).value());
}

// `load()` with nothing escaping: a damaged count makes the runtime throw, as in
// ModelSession::load.
template <typename Load>
auto guarded_load(const std::string& path, Load&& load) -> decltype(load()) {
  try {
    return load();
  } catch (const std::exception& e) {
    return Error{ErrorCode::kInvalidModel,
                 path + ": loading failed (" + e.what() +
                     "): the file is damaged or truncated, or needs more memory than there is; "
                     "verify its sha256 and download or export it again"};
  }
}

}  // namespace rne::runner::detail

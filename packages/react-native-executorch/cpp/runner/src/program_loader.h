// The one loader of the programs the runner opens (ModelSession's LLM, VisionEncoder,
// AudioEncoder): opening a .pte with the same checks (its header, the whole file, full
// verification, check_program, the methods it must have), the no-throw guard around it, the
// errors that name the file and what to do (ProgramKind), and, for the encoders written by
// tools/export_encoder.py, their integer constant methods and the embeddings they return.
#pragma once

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "rne/runner/embeddings.h"
#include "rne/runner/model_file.h"
#include "rne/runner/result.h"

#include <executorch/extension/module/module.h>

namespace rne::runner::detail {

using RuntimeError = ::executorch::runtime::Error;

// What differs between the programs the loader opens: how its errors name the program and say
// what to do, and how the runtime loads it.
class ProgramKind {
 public:
  virtual ~ProgramKind() = default;
  // A program that is not what it should be: kInvalidModel naming the file.
  virtual Error contract_error(const std::string& path, const std::string& what) const = 0;
  // A file that is no ExecuTorch program at all.
  virtual Error not_a_program(const std::string& path) const = 0;
  // The runtime failed parsing the program or loading a method (`stage`).
  virtual Error load_failure(const std::string& path, const std::string& stage,
                             RuntimeError error) const = 0;
  // The runtime threw while loading (a damaged count; a device that cannot hold the program).
  virtual Error load_threw(const std::string& path, const char* what) const = 0;
  // Whether every method loads with XNNPACK's weight cache on (packed weights shared by name).
  virtual bool weight_cache() const { return false; }
};

// An encoder program written by tools/export_encoder.py. `kind` names it in errors ("a vision
// encoder"); `export_hint` is how to get a good one.
class EncoderKind final : public ProgramKind {
 public:
  EncoderKind(const char* kind, const char* export_hint) : kind_(kind), export_hint_(export_hint) {}
  Error contract_error(const std::string& path, const std::string& what) const override;
  Error not_a_program(const std::string& path) const override;
  Error load_failure(const std::string& path, const std::string& stage,
                     RuntimeError error) const override;
  Error load_threw(const std::string& path, const char* what) const override;

 private:
  const char* kind_;
  const char* export_hint_;
};

// A method that failed while running: kExecutionFailed.
Error encoder_execution_failure(const std::string& path, const std::string& method,
                                RuntimeError error);

struct OpenedProgram {
  std::unique_ptr<::executorch::extension::module::Module> module;
  std::unordered_set<std::string> methods;  // every method the program has
};

// Checks `file` is a whole, sound .pte with every method in `required`, and loads those methods.
// Where the program has the method `shares_arenas_with` (ModelSession: "verify"), its methods
// share one set of memory-planned arenas (exported with share_mutable_buffers). Throws what the
// runtime throws on a damaged count (callers guard with guarded_load).
Result<OpenedProgram> open_program(const ProgramKind& kind, std::shared_ptr<const ModelFile> file,
                                   std::initializer_list<const char*> required,
                                   const char* shares_arenas_with = nullptr);

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

// `load()` with nothing escaping: the runtime sizes containers from counts in the file, so a
// damaged count throws (bad_alloc, length_error) from inside it, and so does a delegate when the
// device cannot hold what an intact file asks for; `kind` words the error.
template <typename Load>
auto guarded_load(const ProgramKind& kind, const std::string& path, Load&& load)
    -> decltype(load()) {
  try {
    return load();
  } catch (const std::exception& e) {
    return kind.load_threw(path, e.what());
  }
}

// Program::load(file): opens `file` as `kind` with `required` (open_program), then
// `finish(file, opened)` makes the session or encoder and reads its contract; nothing escapes
// (guarded_load).
template <typename Finish>
auto load_program(const ProgramKind& kind, std::shared_ptr<const ModelFile> file,
                  std::initializer_list<const char*> required, Finish&& finish,
                  const char* shares_arenas_with = nullptr)
    -> decltype(finish(file, std::declval<OpenedProgram&>())) {
  const std::string path = file->path();
  return guarded_load(kind, path, [&]() -> decltype(finish(file, std::declval<OpenedProgram&>())) {
    auto opened = open_program(kind, file, required, shares_arenas_with);
    if (!opened.ok()) return opened.error();
    return finish(std::move(file), *opened);
  });
}

// Program::load(path): the file memory-mapped (ModelFile::Hold::kMapped), then
// Program::load(file).
template <typename Program>
Result<std::unique_ptr<Program>> load_mapped(const std::string& path) {
  auto file = ModelFile::open(path, ModelFile::Hold::kMapped);
  if (!file.ok()) return file.error();
  return Program::load(std::move(file).value());
}

}  // namespace rne::runner::detail

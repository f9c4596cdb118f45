#include "program_loader.h"

#include "rne/runner/program_check.h"
#include "held_bytes_loader.h"

#include <executorch/runtime/backend/options.h>

#include <cmath>
#include <exception>
#include <string>

namespace rne::runner::detail {

namespace et = ::executorch;
using et::extension::module::Module;

Error EncoderKind::contract_error(const std::string& path, const std::string& what) const {
  return {ErrorCode::kInvalidModel,
          path + ": " + what + " (not " + kind_ + " program: " + export_hint_ +
              "; if it was copied or downloaded, it may be a corrupt file: verify its sha256)"};
}

Error EncoderKind::not_a_program(const std::string& path) const {
  return contract_error(path, "not an ExecuTorch program (.pte)");
}

Error EncoderKind::load_failure(const std::string& path, const std::string& stage,
                                RuntimeError error) const {
  return {ErrorCode::kInvalidModel,
          path + ": " + stage + " failed (runtime error " +
              std::to_string(static_cast<unsigned>(error)) +
              "): the file is damaged or was exported for a backend or operators this build "
              "lacks; verify its sha256, or export it again with tools/export_encoder.py"};
}

Error EncoderKind::load_threw(const std::string& path, const char* what) const {
  return {ErrorCode::kInvalidModel,
          path + ": loading failed (" + what +
              "): the file is damaged or truncated, or needs more memory than there is; "
              "verify its sha256 and download or export it again"};
}

Error encoder_execution_failure(const std::string& path, const std::string& method,
                                et::runtime::Error error) {
  return {ErrorCode::kExecutionFailed,
          path + ": " + method + " failed (runtime error " +
              std::to_string(static_cast<unsigned>(error)) +
              "); if it fails again, the file may be corrupt: verify its sha256"};
}

Result<Embeddings> output_embeddings(const EncoderKind& kind, const std::string& path,
                                     const char* method, const et::aten::Tensor& output,
                                     int64_t total_rows, int64_t rows, int64_t width) {
  if (output.numel() != total_rows * width) {
    return kind.contract_error(path, std::string(method) + " returned " +
                                         std::to_string(output.numel()) + " values, expected " +
                                         std::to_string(total_rows * width));
  }
  const float* data = output.const_data_ptr<float>();
  std::vector<float> values(data, data + rows * width);
  // Damaged weights that still load show up as NaN or inf, which the decoder cannot use.
  for (float v : values) {
    if (!std::isfinite(v)) {
      return Error{ErrorCode::kExecutionFailed,
                   path + ": " + method + " produced a non-finite value: the weights are "
                   "damaged (corrupt file); verify its sha256 and download or export it again"};
    }
  }
  Embeddings embeddings;
  embeddings.num_tokens = rows;
  embeddings.hidden = width;
  embeddings.values = std::move(values);
  return embeddings;
}

namespace {

// Parses the program fully verified (a damaged header must fail here, not crash later; Minimal
// verification lets a flipped offset reach a wild read). Full verification walks the program's
// tables only, not the weight segments, so it is cheap even for a multi-GB file. With the weight
// cache, XNNPACK keys packed weights by their names in the program's data, so another session
// of the same file, and its other methods, reuse them instead of packing copies.
RuntimeError parse_program(Module& module, bool weight_cache) {
  const auto verification = et::runtime::Program::Verification::InternalConsistency;
  if (!weight_cache) return module.load(verification);
  et::runtime::BackendOptions<1> xnnpack;
  xnnpack.set_option("weight_cache_enabled", true);
  et::runtime::LoadBackendOptionsMap options;
  options.set_options("XnnpackBackend", xnnpack.view());
  return module.load(options, verification);
}

}  // namespace

Result<OpenedProgram> open_program(const ProgramKind& kind, std::shared_ptr<const ModelFile> file,
                                   std::initializer_list<const char*> required,
                                   const char* shares_arenas_with) {
  const std::string path = file->path();
  // A .pte is a FlatBuffer whose file identifier (bytes 4..7) starts with "ET".
  if (file->size() < 8 || file->data()[4] != 'E' || file->data()[5] != 'T') {
    return kind.not_a_program(path);
  }
  if (auto whole = file->check_still_whole(); !whole.ok()) return whole.error();
  auto parsed = [&](bool shared_arenas) -> Result<std::unique_ptr<Module>> {
    auto module = std::make_unique<Module>(std::make_unique<HeldBytesLoader>(file), nullptr,
                                           nullptr, nullptr, nullptr, shared_arenas);
    if (auto err = parse_program(*module, kind.weight_cache()); err != RuntimeError::Ok) {
      return kind.load_failure(path, "parsing the program", err);
    }
    return module;
  };
  auto module = parsed(false);
  if (!module.ok()) return module.error();
  // Indices the runtime trusts when it builds a Method (a damaged one aborts the process).
  if (auto sound = check_program(file->data(), file->size(), path); !sound.ok()) {
    return sound.error();
  }
  OpenedProgram opened;
  if (auto names = (*module)->method_names(); names.ok()) opened.methods = std::move(*names);
  for (const char* method : required) {
    if (opened.methods.count(method) == 0) {
      return kind.contract_error(path, std::string("method '") + method + "' is missing");
    }
  }
  // Whether methods share arenas is decided when the Module is made: make it again.
  if (shares_arenas_with != nullptr && opened.methods.count(shares_arenas_with) == 1) {
    module = parsed(true);
    if (!module.ok()) return module.error();
  }
  opened.module = std::move(module).value();
  for (const char* method : required) {
    if (auto err = opened.module->load_method(method); err != RuntimeError::Ok) {
      return kind.load_failure(path, std::string("loading method '") + method + "'", err);
    }
  }
  return opened;
}

Result<void> read_int_constants(const EncoderKind& kind, Module& module, const std::string& path,
                                std::initializer_list<IntConstant> constants,
                                bool has_backend_code, int64_t& backend_code) {
  auto read = [&](const IntConstant& constant) -> Result<void> {
    auto out = module.execute(constant.method);
    if (!out.ok() || out->empty() || !out->at(0).isInt()) {
      return kind.contract_error(path, std::string("constant method '") + constant.method +
                                           "' is missing or does not return an integer");
    }
    *constant.field = out->at(0).toInt();
    return {};
  };
  for (const IntConstant& constant : constants) {
    if (auto done = read(constant); !done.ok()) return done;
  }
  if (has_backend_code) return read({&backend_code, "get_backend"});
  return {};
}

}  // namespace rne::runner::detail

#include "encoder_program.h"

#include "rne/runner/program_check.h"
#include "held_bytes_loader.h"

#include <cmath>
#include <exception>
#include <string>

namespace rne::runner::detail {

namespace et = ::executorch;
using et::extension::module::Module;

Error encoder_contract_error(const EncoderKind& kind, const std::string& path,
                             const std::string& what) {
  return {ErrorCode::kInvalidModel,
          path + ": " + what + " (not " + kind.kind + " program: " + kind.export_hint +
              "; if it was copied or downloaded, it may be a corrupt file: verify its sha256)"};
}

Error encoder_runtime_failure(const std::string& path, const std::string& stage,
                              et::runtime::Error error) {
  return {ErrorCode::kInvalidModel,
          path + ": " + stage + " failed (runtime error " +
              std::to_string(static_cast<unsigned>(error)) +
              "): the file is damaged or was exported for a backend or operators this build "
              "lacks; verify its sha256, or export it again with tools/export_encoder.py"};
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
    return encoder_contract_error(kind, path,
                                  std::string(method) + " returned " +
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

Result<OpenedEncoder> open_encoder(const EncoderKind& kind, std::shared_ptr<const ModelFile> file,
                                   std::initializer_list<const char*> methods) {
  const std::string path = file->path();
  if (file->size() < 8 || file->data()[4] != 'E' || file->data()[5] != 'T') {
    return encoder_contract_error(kind, path, "not an ExecuTorch program (.pte)");
  }
  if (auto whole = file->check_still_whole(); !whole.ok()) return whole.error();
  const uint8_t* data = file->data();
  const size_t size = file->size();
  OpenedEncoder opened;
  opened.module = std::make_unique<Module>(std::make_unique<HeldBytesLoader>(std::move(file)));
  Module& module = *opened.module;
  if (auto err = module.load(et::runtime::Program::Verification::InternalConsistency);
      err != et::runtime::Error::Ok) {
    return encoder_runtime_failure(path, "parsing the program", err);
  }
  if (auto sound = check_program(data, size, path); !sound.ok()) return sound.error();
  auto names = module.method_names();
  for (const char* method : methods) {
    if (!names.ok() || names->count(method) == 0) {
      return encoder_contract_error(kind, path, std::string("method '") + method + "' is missing");
    }
    if (auto err = module.load_method(method); err != et::runtime::Error::Ok) {
      return encoder_runtime_failure(path, std::string("loading method '") + method + "'", err);
    }
  }
  opened.has_backend_code = names.ok() && names->count("get_backend") > 0;
  return opened;
}

Result<void> read_int_constants(const EncoderKind& kind, Module& module, const std::string& path,
                                std::initializer_list<IntConstant> constants,
                                bool has_backend_code, int64_t& backend_code) {
  auto read = [&](const IntConstant& constant) -> Result<void> {
    auto out = module.execute(constant.method);
    if (!out.ok() || out->empty() || !out->at(0).isInt()) {
      return encoder_contract_error(kind, path,
                                    std::string("constant method '") + constant.method +
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

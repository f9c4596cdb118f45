#include "rne/runner/vision_encoder.h"

#include "program_loader.h"

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include <string>

namespace rne::runner {

namespace et = ::executorch;
using et::extension::module::Module;

namespace {

const detail::EncoderKind kVision{"a vision encoder",
                                      "export one with tools/export_encoder.py"};

Error contract_error(const std::string& path, const std::string& what) {
  return kVision.contract_error(path, what);
}

}  // namespace

VisionEncoder::~VisionEncoder() = default;

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::load(const std::string& path) {
  return detail::load_mapped<VisionEncoder>(path);
}

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::load(std::shared_ptr<const ModelFile> file) {
  return detail::load_program(kVision, std::move(file), {kMethod}, [](auto file, auto& opened) {
    return finish_load(std::move(file), opened);
  });
}

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::finish_load(
    std::shared_ptr<const ModelFile> file, detail::OpenedProgram& opened) {
  const std::string path = file->path();
  std::unique_ptr<VisionEncoder> encoder(new VisionEncoder());
  encoder->path_ = path;
  encoder->file_ = std::move(file);
  encoder->module_ = std::move(opened.module);
  Module& module = *encoder->module_;

  auto meta = module.method_meta(kMethod);
  if (!meta.ok() || meta->num_inputs() != 2 || meta->num_outputs() != 1) {
    return contract_error(path, "'vision_encoder' must take (pixel_values, position_ids) and "
                                "return one tensor");
  }
  auto pixels = meta->input_tensor_meta(0);
  auto positions = meta->input_tensor_meta(1);
  auto output = meta->output_tensor_meta(0);
  if (!pixels.ok() || pixels->sizes().size() != 3 || pixels->sizes()[0] != 1 ||
      pixels->scalar_type() != et::aten::ScalarType::Float) {
    return contract_error(path, "input 0 must be float32 pixel_values [1, patches, patch_dim]");
  }
  if (!positions.ok() || positions->sizes().size() != 3 ||
      positions->sizes()[1] != pixels->sizes()[1] || positions->sizes()[2] != 2 ||
      positions->scalar_type() != et::aten::ScalarType::Long) {
    return contract_error(path, "input 1 must be int64 position_ids [1, patches, 2]");
  }
  if (!output.ok() || output->sizes().size() != 2 ||
      output->scalar_type() != et::aten::ScalarType::Float) {
    return contract_error(path, "the output must be float32 embeddings [soft_tokens, hidden]");
  }

  VisionEncoderContract& c = encoder->contract_;
  c.max_patches = pixels->sizes()[1];
  c.patch_dim = pixels->sizes()[2];
  if (auto read = detail::read_int_constants(
          kVision, module, path,
          {{&c.max_soft_tokens, "vision_max_soft_tokens"},
           {&c.patch_size, "vision_patch_size"},
           {&c.pooling_kernel_size, "vision_pooling_kernel_size"},
           {&c.text_hidden, "vision_text_hidden"}},
          opened.methods.count("get_backend") > 0, c.backend_code);
      !read.ok()) {
    return read.error();
  }
  const int64_t pool = c.pooling_kernel_size;
  if (c.max_soft_tokens < 1 || pool < 1 || c.patch_size < 1 ||
      c.max_patches != c.max_soft_tokens * pool * pool ||
      c.patch_dim != 3 * c.patch_size * c.patch_size ||
      output->sizes()[0] != c.max_soft_tokens || output->sizes()[1] != c.text_hidden) {
    return contract_error(
        path, "inconsistent metadata: max_soft_tokens=" + std::to_string(c.max_soft_tokens) +
                  " pooling=" + std::to_string(pool) + " patch_size=" +
                  std::to_string(c.patch_size) + " for inputs [1, " +
                  std::to_string(c.max_patches) + ", " + std::to_string(c.patch_dim) +
                  "] and output [" + std::to_string(output->sizes()[0]) + ", " +
                  std::to_string(output->sizes()[1]) + "]");
  }
  return encoder;
}

Result<Embeddings> VisionEncoder::encode(const std::vector<float>& pixel_values,
                                              const std::vector<int64_t>& position_ids,
                                              int64_t num_soft_tokens) {
  const VisionEncoderContract& c = contract_;
  if (static_cast<int64_t>(pixel_values.size()) != c.max_patches * c.patch_dim ||
      static_cast<int64_t>(position_ids.size()) != c.max_patches * 2) {
    return Error{ErrorCode::kInvalidArgument,
                 "vision encoder: pixel_values has " + std::to_string(pixel_values.size()) +
                     " values and position_ids " + std::to_string(position_ids.size()) +
                     "; this encoder takes [" + std::to_string(c.max_patches) + ", " +
                     std::to_string(c.patch_dim) + "] and [" + std::to_string(c.max_patches) +
                     ", 2]: preprocess with max_soft_tokens=" +
                     std::to_string(c.max_soft_tokens) + ", patch_size=" +
                     std::to_string(c.patch_size) + ", pooling_kernel_size=" +
                     std::to_string(c.pooling_kernel_size)};
  }
  if (num_soft_tokens < 1 || num_soft_tokens > c.max_soft_tokens) {
    return Error{ErrorCode::kInvalidArgument,
                 "vision encoder: " + std::to_string(num_soft_tokens) +
                     " soft tokens; an image has 1.." + std::to_string(c.max_soft_tokens) +
                     " (the count gemma4_preprocess returns with it)"};
  }
  if (auto whole = file_->check_still_whole(); !whole.ok()) return whole.error();
  // The program reads its inputs and never writes them (they are not memory-planned: the
  // caller's buffers are the inputs), so the const data is handed over without a copy.
  auto pixels = et::extension::from_blob(
      const_cast<float*>(pixel_values.data()),
      {1, static_cast<et::aten::SizesType>(c.max_patches),
       static_cast<et::aten::SizesType>(c.patch_dim)},
      et::aten::ScalarType::Float);
  auto positions = et::extension::from_blob(
      const_cast<int64_t*>(position_ids.data()),
      {1, static_cast<et::aten::SizesType>(c.max_patches), 2}, et::aten::ScalarType::Long);
  auto out = module_->execute(kMethod, {pixels, positions});
  if (!out.ok()) return detail::encoder_execution_failure(path_, kMethod, out.error());
  return detail::output_embeddings(kVision, path_, kMethod, out->at(0).toTensor(),
                                   c.max_soft_tokens, num_soft_tokens, c.text_hidden);
}

}  // namespace rne::runner

// A loaded vision encoder: the `vision_encoder` method of a .pte written by
// tools/export_encoder.py (Gemma 4's vision tower and its projection into the text embedding
// space). It takes the tensors of one image as rne::media::gemma4_preprocess (and transformers'
// Gemma 4 image processor) gives them and returns the embeddings that replace the image's soft
// tokens in the decoder's input, in order. See docs/multimodal.md.
#pragma once

#include "rne/runner/encoder_decls.h"

namespace rne::runner {

// What the program declares (its input shapes and constant methods): the preprocessing it
// needs and the shape of what it returns.
struct VisionEncoderContract {
  int64_t max_soft_tokens = 0;      // vision_max_soft_tokens: the image processor's budget
  int64_t patch_size = 0;           // vision_patch_size
  int64_t pooling_kernel_size = 0;  // vision_pooling_kernel_size
  int64_t max_patches = 0;          // input rows: max_soft_tokens * pooling^2
  int64_t patch_dim = 0;            // input columns: 3 * patch_size^2
  int64_t text_hidden = 0;          // vision_text_hidden: the decoder's embedding width
  int64_t backend_code = -1;        // get_backend, when the exporter wrote it
};

class VisionEncoder {
 public:
  static constexpr const char* kMethod = "vision_encoder";

  // Memory-maps `path` (ModelFile::Hold::kMapped), checks it is a .pte with a `vision_encoder`
  // method of the expected signature and reads the contract. Errors: kNotFound (no such file),
  // kInvalidModel (naming the file and what is missing or malformed).
  static Result<std::unique_ptr<VisionEncoder>> load(const std::string& path);
  static Result<std::unique_ptr<VisionEncoder>> load(std::shared_ptr<const ModelFile> file);
  ~VisionEncoder();
  VisionEncoder(const VisionEncoder&) = delete;
  VisionEncoder& operator=(const VisionEncoder&) = delete;

  const VisionEncoderContract& contract() const { return contract_; }
  const std::string& path() const { return path_; }

  // Runs the encoder on one image's tensors: pixel_values [max_patches, patch_dim] and
  // position_ids [max_patches, 2] (x, y; -1 on padding rows), as gemma4_preprocess fills
  // Gemma4ImageInput, with the image's soft-token count (1..max_soft_tokens). Returns the first
  // `num_soft_tokens` rows (the program's rows past them are zero). Errors: kInvalidArgument for
  // tensors of the wrong size or a count out of range (preprocess with this encoder's
  // contract), kExecutionFailed when the runtime fails or produces non-finite values.
  Result<Embeddings> encode(const std::vector<float>& pixel_values,
                                 const std::vector<int64_t>& position_ids,
                                 int64_t num_soft_tokens);

 private:
  VisionEncoder() = default;
  // The encoder of an opened program, its contract read and checked (program_loader.h).
  static Result<std::unique_ptr<VisionEncoder>> finish_load(std::shared_ptr<const ModelFile> file,
                                                     detail::OpenedProgram& opened);
  std::string path_;
  std::shared_ptr<const ModelFile> file_;
  std::unique_ptr<executorch::extension::module::Module> module_;
  VisionEncoderContract contract_;
};

}  // namespace rne::runner

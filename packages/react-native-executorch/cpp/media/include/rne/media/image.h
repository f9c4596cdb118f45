// Image input for vision-language models: decode JPEG/PNG, resize as Pillow does, and turn the
// picture into the patch tensor Gemma 4's vision encoder takes, exactly as transformers'
// Gemma 4 image processor (Gemma4ImageProcessorPil) does. See docs/multimodal.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rne/runner/result.h"

namespace rne::media {

using runner::Error;
using runner::ErrorCode;
using runner::Result;

// 8-bit RGB, rows top to bottom, pixels interleaved (height x width x 3).
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
};

struct DecodeLimits {
  // Decoding holds the decoder's buffer and the RGB copy at once: 6 bytes per pixel for a JPEG,
  // 7 for a PNG (about 400 MB at 64 MP).
  // Larger pictures are refused before any pixel is decoded (the header is read first), and so
  // is a PNG whose chunks do not fit in the file or whose compressed data is too small for its
  // declared size.
  int64_t max_pixels = 64'000'000;
  size_t max_file_bytes = 256u << 20;
};

// Decodes a JPEG or PNG (by its signature; other formats are an error) to RGB as PIL's
// `Image.convert("RGB")` does after transformers' `convert_to_rgb`: grey is replicated, alpha
// (an alpha channel or a PNG tRNS chunk) is composited onto white with Pillow's integer
// `alpha_composite` arithmetic, palettes are expanded. 16-bit PNGs keep the high byte of each
// sample (PIL does the same for colour; for 16-bit grey it clips at 255 instead: see
// docs/multimodal.md). No EXIF orientation is applied (neither does the processor).
Result<RgbImage> decode_image(const uint8_t* data, size_t size, const DecodeLimits& limits = {});
Result<RgbImage> decode_image_file(const std::string& path, const DecodeLimits& limits = {});
// The file's bytes. A regular file only: a FIFO, directory or device is refused without
// opening it for reading, so nothing blocks (kNotFound, as for a missing or unreadable file);
// over max_file_bytes is kInvalidArgument.
Result<std::string> read_image_file(const std::string& path, const DecodeLimits& limits = {});

// Pillow's `Image.resize(..., resample=BICUBIC)` on an RGB image, bit for bit: separable
// convolution with Keys' cubic (a = -0.5) whose support widens with the downscale factor
// (antialiasing), 22-bit fixed-point coefficients, horizontal pass first with 8-bit rounding
// in between. A pass whose size does not change is skipped, as Pillow does.
RgbImage resize_bicubic(const RgbImage& image, int width, int height);

// Gemma 4's image processor settings (processor_config.json: patch_size, pooling_kernel_size,
// max_soft_tokens, rescale_factor; do_normalize is false for Gemma 4, so there is no mean/std).
struct Gemma4ImageConfig {
  int patch_size = 16;
  int pooling_kernel_size = 3;
  int max_soft_tokens = 280;  // one of 70, 140, 280, 560, 1120
  double rescale_factor = 1.0 / 255.0;
};

struct Size2D {
  int height = 0;
  int width = 0;
};

// The picture's size from its header alone, with decode_image's checks of format and limits.
Result<Size2D> image_size(const uint8_t* data, size_t size, const DecodeLimits& limits = {});

// The size the processor resizes an image of `height` x `width` to: the largest with both sides
// multiples of patch_size * pooling_kernel_size and at most max_soft_tokens * pooling^2 patches,
// keeping the aspect ratio (get_aspect_ratio_preserving_size; same float arithmetic).
Result<Size2D> gemma4_target_size(int height, int width, const Gemma4ImageConfig& config = {});

// What the vision encoder takes for one image.
struct Gemma4ImageInput {
  Size2D resized;            // the picture's size after the resize
  int num_patches = 0;       // real patches: (height / patch) * (width / patch)
  int max_patches = 0;       // max_soft_tokens * pooling^2: the padded length
  int patch_dim = 0;         // patch_size^2 * 3
  int num_soft_tokens = 0;   // num_patches / pooling^2: the <|image|> tokens of this image
  // [max_patches, patch_dim] float32, patches in row-major order over the patch grid, each
  // patch's values ordered (row, column, channel); rows past num_patches are zero.
  std::vector<float> pixel_values;
  // [max_patches, 2] (x = patch column, y = patch row); -1 for the padding rows.
  std::vector<int64_t> position_ids;
};

Result<Gemma4ImageInput> gemma4_preprocess(const RgbImage& image,
                                           const Gemma4ImageConfig& config = {});

}  // namespace rne::media

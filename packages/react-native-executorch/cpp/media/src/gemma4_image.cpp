// Gemma 4's image processor (transformers' Gemma4ImageProcessorPil): aspect-preserving resize to
// a patch budget, rescale to [0, 1], patchify, pad to the budget.
#include <cmath>

#include "rne/media/image.h"

namespace rne::media {
namespace {

Error invalid(const std::string& message) { return Error{ErrorCode::kInvalidArgument, message}; }

Result<void> validate(const Gemma4ImageConfig& config) {
  if (config.patch_size <= 0 || config.pooling_kernel_size <= 0) {
    return invalid("Gemma 4 image config: patch_size and pooling_kernel_size must be positive");
  }
  const int m = config.max_soft_tokens;
  if (m != 70 && m != 140 && m != 280 && m != 560 && m != 1120) {
    return invalid("Gemma 4 image config: max_soft_tokens must be one of 70, 140, 280, 560, "
                   "1120 (got " + std::to_string(m) + ")");
  }
  return {};
}

}  // namespace

Result<Size2D> gemma4_target_size(int height, int width, const Gemma4ImageConfig& config) {
  if (auto ok = validate(config); !ok.ok()) return ok.error();
  if (height <= 0 || width <= 0) {
    return invalid("cannot resize an image of " + std::to_string(width) + "x" +
                   std::to_string(height) + " pixels");
  }
  const int64_t pooling = config.pooling_kernel_size;
  const int64_t max_patches = static_cast<int64_t>(config.max_soft_tokens) * pooling * pooling;
  const int64_t target_px = max_patches * config.patch_size * config.patch_size;
  const int64_t side_mult = pooling * config.patch_size;
  // The same double arithmetic as the Python (true division, sqrt, floor), so sizes agree
  // exactly, rounding edges included.
  const double factor = std::sqrt(static_cast<double>(target_px) /
                                  static_cast<double>(static_cast<int64_t>(height) * width));
  const double ideal_height = factor * height;
  const double ideal_width = factor * width;
  int64_t target_height =
      static_cast<int64_t>(std::floor(ideal_height / static_cast<double>(side_mult))) * side_mult;
  int64_t target_width =
      static_cast<int64_t>(std::floor(ideal_width / static_cast<double>(side_mult))) * side_mult;
  if (target_height == 0 && target_width == 0) {
    return invalid("the image would be resized to 0x0 pixels");
  }
  // A very thin image: its short side gets one pooled patch row, its long side keeps the
  // aspect ratio (integer quotient) up to what the budget allows.
  const int64_t max_side = (max_patches / (pooling * pooling)) * side_mult;
  if (target_height == 0) {
    target_height = side_mult;
    target_width = std::min(static_cast<int64_t>(std::floor(static_cast<double>(width) / height)) *
                                side_mult,
                            max_side);
  } else if (target_width == 0) {
    target_width = side_mult;
    target_height = std::min(static_cast<int64_t>(std::floor(static_cast<double>(height) / width)) *
                                 side_mult,
                             max_side);
  }
  if (target_height * target_width > target_px) {
    return invalid("resizing " + std::to_string(height) + "x" + std::to_string(width) + " to " +
                   std::to_string(target_height) + "x" + std::to_string(target_width) +
                   " exceeds the patch budget of " + std::to_string(max_patches));
  }
  return Size2D{static_cast<int>(target_height), static_cast<int>(target_width)};
}

Result<Gemma4ImageInput> gemma4_preprocess(const RgbImage& image,
                                           const Gemma4ImageConfig& config) {
  if (image.pixels.size() != static_cast<size_t>(image.width) * image.height * 3) {
    return invalid("the RGB image's pixel buffer does not match its size");
  }
  auto target = gemma4_target_size(image.height, image.width, config);
  if (!target.ok()) return target.error();
  const RgbImage resized = resize_bicubic(image, target->width, target->height);

  const int ps = config.patch_size;
  const int pooling = config.pooling_kernel_size;
  const int grid_h = target->height / ps;
  const int grid_w = target->width / ps;
  Gemma4ImageInput out;
  out.resized = *target;
  out.num_patches = grid_h * grid_w;
  out.max_patches = config.max_soft_tokens * pooling * pooling;
  out.patch_dim = ps * ps * 3;
  out.num_soft_tokens = out.num_patches / (pooling * pooling);
  out.pixel_values.assign(static_cast<size_t>(out.max_patches) * out.patch_dim, 0.0f);
  out.position_ids.assign(static_cast<size_t>(out.max_patches) * 2, -1);

  // Rescale as numpy does it: uint8 -> float64, times the factor, then float32.
  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<float>(v * config.rescale_factor);
  const size_t stride = static_cast<size_t>(resized.width) * 3;
  for (int py = 0; py < grid_h; ++py) {
    for (int px = 0; px < grid_w; ++px) {
      const size_t patch = static_cast<size_t>(py) * grid_w + px;
      float* dst = &out.pixel_values[patch * out.patch_dim];
      for (int y = 0; y < ps; ++y) {
        const uint8_t* row = &resized.pixels[(static_cast<size_t>(py) * ps + y) * stride +
                                             static_cast<size_t>(px) * ps * 3];
        for (int i = 0; i < ps * 3; ++i) *dst++ = lut[row[i]];
      }
      out.position_ids[patch * 2 + 0] = px;
      out.position_ids[patch * 2 + 1] = py;
    }
  }
  return out;
}

}  // namespace rne::media

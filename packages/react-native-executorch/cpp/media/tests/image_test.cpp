// Properties of the image path that hold without a reference implementation; parity with
// transformers' processor is tests/test_image_preprocess.py.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "rne/media/image.h"

namespace rne::media {
namespace {

RgbImage pattern(int width, int height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = (i * 37 + i / 7) % 256;
  return image;
}

TEST(Gemma4Image, PatchLayoutWithoutResize) {
  // 912 x 672 is already the budget's size for its aspect ratio (the processor scales smaller
  // pictures up): no resize, 57 x 42 patches.
  const RgbImage image = pattern(912, 672);
  auto input = gemma4_preprocess(image);
  ASSERT_TRUE(input.ok()) << input.error().message;
  EXPECT_EQ(input->resized.height, 672);
  EXPECT_EQ(input->resized.width, 912);
  EXPECT_EQ(input->num_patches, 2394);
  EXPECT_EQ(input->num_soft_tokens, 266);
  EXPECT_EQ(input->max_patches, 2520);
  EXPECT_EQ(input->patch_dim, 768);
  // Patch (row 1, column 4), its pixel (row 5, column 9), channel 2.
  const int patch = 1 * 57 + 4, y = 16 + 5, x = 64 + 9, c = 2;
  const float expected = static_cast<float>(image.pixels[(y * 912 + x) * 3 + c] * (1.0 / 255.0));
  EXPECT_EQ(input->pixel_values[patch * 768 + (5 * 16 + 9) * 3 + c], expected);
  EXPECT_EQ(input->position_ids[patch * 2], 4);
  EXPECT_EQ(input->position_ids[patch * 2 + 1], 1);
  EXPECT_EQ(input->position_ids[2394 * 2], -1);
  EXPECT_EQ(input->pixel_values[2394 * 768], 0.0f);
}

TEST(Gemma4Image, ResizeKeepsAFlatColourFlat) {
  RgbImage image = pattern(517, 333);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = i % 3 == 0 ? 200 : 17;
  for (auto [w, h] : {std::pair{100, 50}, std::pair{1000, 900}, std::pair{517, 40}}) {
    const RgbImage out = resize_bicubic(image, w, h);
    ASSERT_EQ(out.pixels.size(), static_cast<size_t>(w) * h * 3);
    for (size_t i = 0; i < out.pixels.size(); ++i) {
      ASSERT_EQ(out.pixels[i], i % 3 == 0 ? 200 : 17) << w << "x" << h << " at " << i;
    }
  }
}

TEST(Gemma4Image, ConfigAndInputErrors) {
  Gemma4ImageConfig config;
  config.max_soft_tokens = 100;
  auto bad_budget = gemma4_target_size(10, 10, config);
  ASSERT_FALSE(bad_budget.ok());
  EXPECT_NE(bad_budget.error().message.find("one of 70, 140, 280, 560, 1120"), std::string::npos);
  EXPECT_FALSE(gemma4_target_size(0, 10).ok());
  RgbImage broken = pattern(4, 4);
  broken.pixels.pop_back();
  EXPECT_FALSE(gemma4_preprocess(broken).ok());
}

TEST(DecodeImage, RejectsWhatIsNotAnImage) {
  const uint8_t text[] = "GIF89a and more";
  auto empty = decode_image(text, 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  auto gif = decode_image(text, sizeof(text));
  ASSERT_FALSE(gif.ok());
  EXPECT_NE(gif.error().message.find("not a JPEG or PNG"), std::string::npos);
  const uint8_t png_signature_only[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto header = decode_image(png_signature_only, sizeof(png_signature_only));
  ASSERT_FALSE(header.ok());
  EXPECT_NE(header.error().message.find("cannot read the PNG header"), std::string::npos);
  auto missing = decode_image_file("/nonexistent/picture.png");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST(DecodeImage, RefusesTooManyPixelsFromTheHeader) {
  // A PNG signature and an IHDR claiming 70000 x 70000: refused before decoding.
  uint8_t png[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                     0, 1, 0x11, 0x70, 0, 1, 0x11, 0x70, 8, 2, 0, 0, 0};
  auto huge = decode_image(png, sizeof(png));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("70000x70000 pixels, over the limit"), std::string::npos)
      << huge.error().message;
}

}  // namespace
}  // namespace rne::media

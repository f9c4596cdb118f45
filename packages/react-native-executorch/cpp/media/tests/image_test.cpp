// Properties of the image path that hold without a reference implementation; parity with
// transformers' processor is tests/encoders/test_image_preprocess.py.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

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

// A PNG signature and IHDR chunk (8-bit RGB) for width x height, CRC left zero (not checked).
std::vector<uint8_t> png_header(uint32_t width, uint32_t height) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                              'I', 'H', 'D', 'R'};
  for (uint32_t v : {width, height}) {
    for (int shift = 24; shift >= 0; shift -= 8) png.push_back((v >> shift) & 0xff);
  }
  png.insert(png.end(), {8, 2, 0, 0, 0, 0, 0, 0, 0});
  return png;
}

TEST(DecodeImage, AChunkLongerThanTheFileIsAClearError) {
  // 45 bytes: IHDR, then a chunk declaring 0xFFFFFFFF bytes. The decoder used to fail on it
  // without a reason, and the message built from that null reason crashed.
  std::vector<uint8_t> png = png_header(1, 1);
  png.insert(png.end(), {0xff, 0xff, 0xff, 0xff, 'I', 'D', 'A', 'T', 0, 0, 0, 0});
  ASSERT_EQ(png.size(), 45u);
  auto image = decode_image(png.data(), png.size());
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.error().message.find("'IDAT' chunk at byte 33 declares 4294967295 bytes, only 4 "
                                       "follow: the file is truncated or damaged"),
            std::string::npos)
      << image.error().message;
}

TEST(DecodeImage, APngTooSmallForItsDeclaredSizeIsRefusedBeforeDecoding) {
  // 4000 x 4000 (48 MB of samples) from 10 bytes of compressed data: deflate cannot expand that
  // far, so nothing is allocated for it.
  std::vector<uint8_t> png = png_header(4000, 4000);
  png.insert(png.end(), {0, 0, 0, 10, 'I', 'D', 'A', 'T', 0x78, 0x9c, 1, 2, 3, 4, 5, 6, 7, 8,
                         0, 0, 0, 0, 0, 0, 0, 0, 'I', 'E', 'N', 'D', 0, 0, 0, 0});
  auto image = decode_image(png.data(), png.size());
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.error().message.find("4000x4000 pixels but holds 10 bytes of compressed image "
                                       "data, too few"),
            std::string::npos)
      << image.error().message;
}

TEST(DecodeImage, AJpegHuffmanTableOverItsSizeIsRefused) {
  // A DHT segment whose 16 code counts add up to 272 (> 256 symbols): stb v2.27 wrote past its
  // tables; the patched copy (cmake/stb_image.cmake) refuses it as corrupt.
  std::vector<uint8_t> jpeg = {0xff, 0xd8, 0xff, 0xc4, 0x01, 0x23, 0x00};
  jpeg.insert(jpeg.end(), 16, 17);
  jpeg.insert(jpeg.end(), 272, 0);
  jpeg.insert(jpeg.end(), {0xff, 0xc0, 0, 11, 8, 0, 8, 0, 8, 1, 1, 0x11, 0, 0xff, 0xd9});
  auto image = decode_image(jpeg.data(), jpeg.size());
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.error().message.find("bad DHT header"), std::string::npos)
      << image.error().message;
}

// A FIFO (with no writer, opening it for reading would wait forever), a directory and a
// device: each refused with an error naming it, well within the time a blocked open would take.
TEST(DecodeImage, SpecialFilesAreRefusedWithoutBlocking) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("rne_media_special_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "picture.png").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
           {fifo, "a FIFO (named pipe)"},
           {dir.string(), "a directory"},
           {"/dev/zero", "a character device"}}) {
    auto decoded = std::async(std::launch::async, [&] { return decode_image_file(path); });
    if (decoded.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // Blocked in open: a writer's open and close lets it go, so the test ends.
      ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
      FAIL() << path << " blocked the read";
    }
    auto image = decoded.get();
    ASSERT_FALSE(image.ok()) << path;
    EXPECT_EQ(image.error().code, ErrorCode::kNotFound);
    EXPECT_NE(image.error().message.find(kind + ", not a regular file"), std::string::npos)
        << image.error().message;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rne::media

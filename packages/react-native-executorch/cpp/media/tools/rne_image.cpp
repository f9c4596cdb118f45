// rne_image: one image through the runner's Gemma 4 preprocessing, for the parity test against
// transformers (tests/encoders/test_image_preprocess.py).
//
//   rne_image [--max-soft-tokens N] [--dump-rgb] IMAGE OUT_PREFIX
//
// Writes OUT_PREFIX.pixels.f32 ([max_patches, patch_dim] float32, native byte order) and
// OUT_PREFIX.positions.i64 ([max_patches, 2] int64), and prints one JSON line with the shapes,
// the resized size and the soft-token count. --dump-rgb also writes the decoded picture as
// OUT_PREFIX.rgb.u8 ([height, width, 3] uint8), to tell decoder differences from resize ones.
//
//   rne_image [--max-soft-tokens N] --target-sizes
//
// reads "HEIGHT WIDTH" lines from stdin and prints "TARGET_HEIGHT TARGET_WIDTH SOFT_TOKENS" (or
// "error: ...") per line: the resize rule alone, for sweeping many sizes without images. An error prints "error: <code>: <message>" on
// stderr and exits with 2.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "rne/media/image.h"

namespace {

template <typename T>
bool write_all(const std::string& path, const std::vector<T>& values) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(T)));
  return static_cast<bool>(file);
}

// The codes decode and preprocess return (runner::error_code_name lives in the runtime-linked
// runner library, which this tool does not need).
const char* code_name(rne::media::ErrorCode code) {
  return code == rne::media::ErrorCode::kNotFound ? "not_found" : "invalid_argument";
}

int fail(const rne::media::Error& error) {
  std::fprintf(stderr, "error: %s: %s\n", code_name(error.code), error.message.c_str());
  return 2;
}

int usage() {
  std::fprintf(stderr,
               "usage: rne_image [--max-soft-tokens N] [--dump-rgb] IMAGE OUT_PREFIX\n"
               "       rne_image [--max-soft-tokens N] --target-sizes < sizes\n");
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  rne::media::Gemma4ImageConfig config;
  std::string positional[2];
  int n = 0;
  bool dump_rgb = false;
  bool target_sizes = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--max-soft-tokens" && i + 1 < argc) {
      config.max_soft_tokens = std::atoi(argv[++i]);
    } else if (arg == "--target-sizes") {
      target_sizes = true;
    } else if (arg == "--dump-rgb") {
      dump_rgb = true;
    } else if (n < 2 && arg.rfind("--", 0) != 0) {
      positional[n++] = arg;
    } else {
      return usage();
    }
  }
  if (target_sizes) {
    if (n != 0) return usage();
    long long height = 0, width = 0;
    while (std::scanf("%lld %lld", &height, &width) == 2) {
      auto size = rne::media::gemma4_target_size(static_cast<int>(height),
                                                 static_cast<int>(width), config);
      if (!size.ok()) {
        std::printf("error: %s\n", size.error().message.c_str());
        continue;
      }
      const int pooled = config.patch_size * config.pooling_kernel_size;
      std::printf("%d %d %d\n", size->height, size->width,
                  (size->height / pooled) * (size->width / pooled));
    }
    return 0;
  }
  if (n != 2) return usage();

  auto image = rne::media::decode_image_file(positional[0]);
  if (!image.ok()) return fail(image.error());
  if (dump_rgb && !write_all(positional[1] + ".rgb.u8", image->pixels)) {
    std::fprintf(stderr, "error: cannot write %s.rgb.u8\n", positional[1].c_str());
    return 1;
  }
  auto input = rne::media::gemma4_preprocess(*image, config);
  if (!input.ok()) return fail(input.error());
  if (!write_all(positional[1] + ".pixels.f32", input->pixel_values) ||
      !write_all(positional[1] + ".positions.i64", input->position_ids)) {
    std::fprintf(stderr, "error: cannot write the output files under %s\n", positional[1].c_str());
    return 1;
  }
  std::printf(
      "{\"decoded\": [%d, %d], \"resized\": [%d, %d], \"num_patches\": %d, \"max_patches\": %d, "
      "\"patch_dim\": %d, \"num_soft_tokens\": %d}\n",
      image->height, image->width, input->resized.height, input->resized.width,
      input->num_patches, input->max_patches, input->patch_dim, input->num_soft_tokens);
  return 0;
}

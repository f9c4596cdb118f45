// rne_vision: one image through the runner's Gemma 4 preprocessing (cpp/media) and a vision
// encoder program (VisionEncoder), for the parity test against transformers
// (tests/test_vision_encoder.py).
//
//   rne_vision ENCODER.pte IMAGE OUT.f32
//
// Preprocesses IMAGE with the encoder's own contract (its max_soft_tokens, patch and pooling
// sizes), runs `vision_encoder` and writes the image's embeddings to OUT.f32 ([num_soft_tokens,
// text_hidden] float32, native byte order). Prints one JSON line: the counts, the resized size
// and the encoder's time. An error prints "error: <code>: <message>" on stderr and exits with 2
// (64 for bad usage).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "rne/media/image.h"
#include "rne/runner/vision_encoder.h"

namespace {

int fail(const rne::runner::Error& error) {
  std::fprintf(stderr, "error: %s: %s\n", rne::runner::error_code_name(error.code),
               error.message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: rne_vision ENCODER.pte IMAGE OUT.f32\n");
    return 64;
  }
  auto encoder = rne::runner::VisionEncoder::load(argv[1]);
  if (!encoder.ok()) return fail(encoder.error());
  const auto& contract = (*encoder)->contract();
  rne::media::Gemma4ImageConfig config;
  config.max_soft_tokens = static_cast<int>(contract.max_soft_tokens);
  config.patch_size = static_cast<int>(contract.patch_size);
  config.pooling_kernel_size = static_cast<int>(contract.pooling_kernel_size);

  auto image = rne::media::decode_image_file(argv[2]);
  if (!image.ok()) return fail(image.error());
  auto input = rne::media::gemma4_preprocess(*image, config);
  if (!input.ok()) return fail(input.error());

  const auto start = std::chrono::steady_clock::now();
  auto embeddings =
      (*encoder)->encode(input->pixel_values, input->position_ids, input->num_soft_tokens);
  const double encode_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!embeddings.ok()) return fail(embeddings.error());

  std::ofstream out(argv[3], std::ios::binary);
  out.write(reinterpret_cast<const char*>(embeddings->values.data()),
            static_cast<std::streamsize>(embeddings->values.size() * sizeof(float)));
  if (!out) {
    return fail({rne::runner::ErrorCode::kNotFound,
                 std::string("cannot write ") + argv[3] + ": check the directory exists and is "
                                                          "writable"});
  }
  std::printf(
      "{\"num_soft_tokens\": %lld, \"hidden\": %lld, \"max_soft_tokens\": %lld, "
      "\"resized\": [%d, %d], \"encode_ms\": %.3f}\n",
      static_cast<long long>(embeddings->num_tokens), static_cast<long long>(embeddings->hidden),
      static_cast<long long>(contract.max_soft_tokens), input->resized.height,
      input->resized.width, encode_ms);
  return 0;
}

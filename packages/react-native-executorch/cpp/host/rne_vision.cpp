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
#include <cstdio>

#include "encoder_cli.h"

#include "rne/media/image.h"
#include "rne/runner/vision_encoder.h"

using rne::host::fail;

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

  auto [embeddings, encode_ms] = rne::host::timed([&] {
    return (*encoder)->encode(input->pixel_values, input->position_ids, input->num_soft_tokens);
  });
  if (!embeddings.ok()) return fail(embeddings.error());

  if (auto written = rne::host::write_rows(*embeddings, argv[3]); !written.ok()) {
    return fail(written.error());
  }
  std::printf(
      "{\"num_soft_tokens\": %lld, \"hidden\": %lld, \"max_soft_tokens\": %lld, "
      "\"resized\": [%d, %d], \"encode_ms\": %.3f}\n",
      static_cast<long long>(embeddings->num_tokens), static_cast<long long>(embeddings->hidden),
      static_cast<long long>(contract.max_soft_tokens), input->resized.height,
      input->resized.width, encode_ms);
  return 0;
}

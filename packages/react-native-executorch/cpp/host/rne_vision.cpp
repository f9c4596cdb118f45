// rne_vision: one image through the runner's Gemma 4 preprocessing (cpp/media) and a vision
// encoder program (VisionEncoder), for the parity test against transformers
// (tests/encoders/test_vision_encoder.py).
//
//   rne_vision ENCODER.pte IMAGE OUT.f32
//
// Preprocesses IMAGE with the encoder's own contract (its max_soft_tokens, patch and pooling
// sizes), runs `vision_encoder` and writes the image's embeddings to OUT.f32 ([num_soft_tokens,
// text_hidden] float32, native byte order). Prints one JSON line: the counts, the resized size
// and the encoder's time. An error prints "error: <code>: <message>" on stderr and exits with 2
// (64 for bad usage).
#include <cstdio>
#include <utility>

#include "encoder_cli.h"

#include "rne/media/image.h"
#include "rne/runner/vision_encoder.h"

int main(int argc, char** argv) {
  using rne::runner::VisionEncoder;
  return rne::host::encoder_main<VisionEncoder>(
      argc, argv, "rne_vision", "IMAGE",
      [](VisionEncoder& encoder, const char* path) -> rne::runner::Result<rne::host::Encoded> {
        const auto& contract = encoder.contract();
        rne::media::Gemma4ImageConfig config;
        config.max_soft_tokens = static_cast<int>(contract.max_soft_tokens);
        config.patch_size = static_cast<int>(contract.patch_size);
        config.pooling_kernel_size = static_cast<int>(contract.pooling_kernel_size);
        auto image = rne::media::decode_image_file(path);
        if (!image.ok()) return image.error();
        auto input = rne::media::gemma4_preprocess(*image, config);
        if (!input.ok()) return input.error();
        auto [embeddings, encode_ms] = rne::host::timed([&] {
          return encoder.encode(input->pixel_values, input->position_ids, input->num_soft_tokens);
        });
        if (!embeddings.ok()) return embeddings.error();
        char line[256];
        std::snprintf(line, sizeof line,
                      "{\"num_soft_tokens\": %lld, \"hidden\": %lld, \"max_soft_tokens\": %lld, "
                      "\"resized\": [%d, %d], \"encode_ms\": %.3f}",
                      static_cast<long long>(embeddings->num_tokens),
                      static_cast<long long>(embeddings->hidden),
                      static_cast<long long>(contract.max_soft_tokens), input->resized.height,
                      input->resized.width, encode_ms);
        return rne::host::Encoded{std::move(embeddings).value(), line};
      });
}

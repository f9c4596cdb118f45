// rne_audio: one WAV clip through an audio encoder program (AudioEncoder: the program's own
// feature transform, then its encoder), for the parity test against transformers
// (tests/encoders/test_audio_encoder.py).
//
//   rne_audio ENCODER.pte WAV OUT.f32
//
// Reads WAV (16 kHz mono, 16-bit PCM or 32-bit float; cpp/media), runs `speech_transform` and
// `audio_encoder` and writes the clip's embeddings to OUT.f32 ([num_tokens, text_hidden]
// float32, native byte order). Prints one JSON line: the counts and the encoder's time. An error
// prints "error: <code>: <message>" on stderr and exits with 2 (64 for bad usage).
#include <cstdio>
#include <utility>

#include "encoder_cli.h"

#include "rne/media/audio.h"
#include "rne/runner/audio_encoder.h"

int main(int argc, char** argv) {
  using rne::runner::AudioEncoder;
  return rne::host::encoder_main<AudioEncoder>(
      argc, argv, "rne_audio", "WAV",
      [](AudioEncoder& encoder, const char* wav) -> rne::runner::Result<rne::host::Encoded> {
        const auto& contract = encoder.contract();
        rne::media::WavLimits limits;
        limits.sample_rate = static_cast<int>(contract.sample_rate);
        auto samples = rne::media::decode_wav_file(wav, limits);
        if (!samples.ok()) return samples.error();
        auto [embeddings, encode_ms] =
            rne::host::timed([&] { return encoder.encode(samples->data(), samples->size()); });
        if (!embeddings.ok()) return embeddings.error();
        char line[256];
        std::snprintf(line, sizeof line,
                      "{\"num_tokens\": %lld, \"hidden\": %lld, \"num_samples\": %zu, "
                      "\"max_samples\": %lld, \"encode_ms\": %.3f}",
                      static_cast<long long>(embeddings->num_tokens),
                      static_cast<long long>(embeddings->hidden), samples->size(),
                      static_cast<long long>(contract.max_samples), encode_ms);
        return rne::host::Encoded{std::move(embeddings).value(), line};
      });
}

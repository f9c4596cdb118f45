// rne_audio: one WAV clip through an audio encoder program (AudioEncoder: the program's own
// feature transform, then its encoder), for the parity test against transformers
// (tests/test_audio_encoder.py).
//
//   rne_audio ENCODER.pte WAV OUT.f32
//
// Reads WAV (16 kHz mono, 16-bit PCM or 32-bit float; cpp/media), runs `speech_transform` and
// `audio_encoder` and writes the clip's embeddings to OUT.f32 ([num_tokens, text_hidden]
// float32, native byte order). Prints one JSON line: the counts and the encoder's time. An error
// prints "error: <code>: <message>" on stderr and exits with 2 (64 for bad usage).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "rne/media/audio.h"
#include "rne/runner/audio_encoder.h"

namespace {

int fail(const rne::runner::Error& error) {
  std::fprintf(stderr, "error: %s: %s\n", rne::runner::error_code_name(error.code),
               error.message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: rne_audio ENCODER.pte WAV OUT.f32\n");
    return 64;
  }
  auto encoder = rne::runner::AudioEncoder::load(argv[1]);
  if (!encoder.ok()) return fail(encoder.error());
  const auto& contract = (*encoder)->contract();
  rne::media::WavLimits limits;
  limits.sample_rate = static_cast<int>(contract.sample_rate);
  auto samples = rne::media::decode_wav_file(argv[2], limits);
  if (!samples.ok()) return fail(samples.error());

  const auto start = std::chrono::steady_clock::now();
  auto embeddings = (*encoder)->encode(samples->data(), samples->size());
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
      "{\"num_tokens\": %lld, \"hidden\": %lld, \"num_samples\": %zu, \"max_samples\": %lld, "
      "\"encode_ms\": %.3f}\n",
      static_cast<long long>(embeddings->num_tokens), static_cast<long long>(embeddings->hidden),
      samples->size(), static_cast<long long>(contract.max_samples), encode_ms);
  return 0;
}

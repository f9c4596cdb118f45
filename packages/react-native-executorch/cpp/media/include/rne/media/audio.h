// Audio input for Gemma 4's audio encoder: WAV files to the 16 kHz mono float samples
// rne::runner::AudioEncoder takes. Decoding only: no resampling or channel mixing (a file at
// another rate or with several channels is an error saying to convert it). See
// docs/multimodal.md.
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

struct WavLimits {
  int sample_rate = 16000;  // the only rate accepted
  size_t max_file_bytes = 64u << 20;  // about 16 minutes of 16-bit audio at 16 kHz
};

// Decodes a RIFF/WAVE file holding 16-bit integer PCM (each sample / 32768) or 32-bit IEEE
// float (as stored) samples, plain or WAVE_FORMAT_EXTENSIBLE, one channel at
// `limits.sample_rate`. Chunks other than `fmt ` and `data` are skipped. Errors
// (kInvalidArgument) name what the file is and what to convert it to.
Result<std::vector<float>> decode_wav(const uint8_t* data, size_t size,
                                      const WavLimits& limits = {});
// decode_wav of a file's bytes (kNotFound when missing or unreadable, and for a FIFO, directory
// or device, which is refused without opening it for reading, so nothing blocks).
Result<std::vector<float>> decode_wav_file(const std::string& path, const WavLimits& limits = {});

}  // namespace rne::media

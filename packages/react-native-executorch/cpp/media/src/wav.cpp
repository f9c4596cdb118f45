#include "rne/media/audio.h"

#include <cstring>

#include "media_file.h"

namespace rne::media {

namespace {

constexpr uint16_t kPcm = 1;
constexpr uint16_t kFloat = 3;
constexpr uint16_t kExtensible = 0xFFFE;

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

Error invalid(const std::string& message) { return {ErrorCode::kInvalidArgument, message}; }

const char* kConvert =
    "; convert it to 16 kHz mono 16-bit PCM WAV (e.g. ffmpeg -i IN -ar 16000 -ac 1 "
    "-c:a pcm_s16le OUT.wav)";

}  // namespace

Result<std::vector<float>> decode_wav(const uint8_t* data, size_t size, const WavLimits& limits) {
  if (size < 12 || std::memcmp(data, "RIFF", 4) != 0 || std::memcmp(data + 8, "WAVE", 4) != 0) {
    return invalid(std::string("not a WAV file (no RIFF/WAVE header)") + kConvert);
  }
  const uint8_t* fmt = nullptr;
  size_t fmt_size = 0;
  const uint8_t* samples = nullptr;
  size_t samples_size = 0;
  size_t at = 12;
  while (at + 8 <= size && samples == nullptr) {
    const uint8_t* chunk = data + at;
    const size_t chunk_size = u32(chunk + 4);
    if (chunk_size > size - at - 8) {
      return invalid("the WAV file is truncated: its '" + std::string(chunk, chunk + 4) +
                     "' chunk declares " + std::to_string(chunk_size) + " bytes, " +
                     std::to_string(size - at - 8) + " are there; write the file again");
    }
    if (std::memcmp(chunk, "fmt ", 4) == 0) {
      fmt = chunk + 8;
      fmt_size = chunk_size;
    } else if (std::memcmp(chunk, "data", 4) == 0) {
      samples = chunk + 8;
      samples_size = chunk_size;
    }
    at += 8 + chunk_size + (chunk_size & 1);  // chunks are padded to even sizes
  }
  if (fmt == nullptr || fmt_size < 16) {
    return invalid(std::string("the WAV file has no valid 'fmt ' chunk") + kConvert);
  }
  if (samples == nullptr) {
    return invalid(std::string("the WAV file has no 'data' chunk before its end") + kConvert);
  }
  uint16_t format = u16(fmt);
  const uint16_t channels = u16(fmt + 2);
  const uint32_t rate = u32(fmt + 4);
  const uint16_t bits = u16(fmt + 14);
  if (format == kExtensible && fmt_size >= 26) format = u16(fmt + 24);  // the sub-format GUID
  const bool pcm16 = format == kPcm && bits == 16;
  const bool float32 = format == kFloat && bits == 32;
  if (!pcm16 && !float32) {
    return invalid("the WAV file holds " + std::to_string(bits) + "-bit " +
                   (format == kPcm     ? std::string("integer PCM")
                    : format == kFloat ? std::string("float")
                                       : "format " + std::to_string(format)) +
                   " samples; only 16-bit PCM and 32-bit float are read" + kConvert);
  }
  if (channels != 1) {
    return invalid("the WAV file has " + std::to_string(channels) +
                   " channels; the audio encoder takes mono" + kConvert);
  }
  if (rate != static_cast<uint32_t>(limits.sample_rate)) {
    return invalid("the WAV file is sampled at " + std::to_string(rate) + " Hz; the audio encoder "
                   "takes " + std::to_string(limits.sample_rate) + " Hz (resample it)" + kConvert);
  }
  const size_t width = bits / 8;
  if (samples_size % width != 0) {
    return invalid("the WAV file's data chunk holds " + std::to_string(samples_size) +
                   " bytes, not a whole number of " + std::to_string(width) + "-byte samples");
  }
  std::vector<float> out(samples_size / width);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = samples + i * width;
    if (pcm16) {
      out[i] = static_cast<float>(static_cast<int16_t>(u16(p))) / 32768.0f;
    } else {
      const uint32_t raw = u32(p);
      std::memcpy(&out[i], &raw, sizeof(float));
    }
  }
  return out;
}

Result<std::vector<float>> decode_wav_file(const std::string& path, const WavLimits& limits) {
  auto read = detail::read_media_file(path, limits.max_file_bytes, "audio",
                                      "split it into shorter clips");
  if (!read.ok()) return read.error();
  const std::string& bytes = *read;
  auto samples =
      decode_wav(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), limits);
  if (!samples.ok()) return Error{samples.error().code, path + ": " + samples.error().message};
  return samples;
}

}  // namespace rne::media

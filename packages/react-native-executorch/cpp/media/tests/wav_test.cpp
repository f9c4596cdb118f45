// The WAV reader (rne/media/audio.h) on files built here byte by byte; the audio encoder's
// parity with transformers on WAVs is tests/encoders/test_audio_encoder.py.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "rne/media/audio.h"

namespace rne::media {
namespace {

void put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(v & 0xFF);
  out.push_back(v >> 8);
}
void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back((v >> (8 * i)) & 0xFF);
}
void tag(std::vector<uint8_t>& out, const char* four) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(four[i]));
}

struct Format {
  uint16_t format = 1;
  uint16_t channels = 1;
  uint32_t rate = 16000;
  uint16_t bits = 16;
  bool extensible = false;
};

// RIFF/WAVE with a `LIST` chunk of odd size before `fmt ` (skipped, padded), then `data`.
std::vector<uint8_t> wav(const Format& f, const std::vector<uint8_t>& samples) {
  std::vector<uint8_t> body;
  tag(body, "WAVE");
  tag(body, "LIST");
  put32(body, 3);
  body.insert(body.end(), {'a', 'b', 'c', 0});
  tag(body, "fmt ");
  put32(body, f.extensible ? 40 : 16);
  put16(body, f.extensible ? 0xFFFE : f.format);
  put16(body, f.channels);
  put32(body, f.rate);
  put32(body, f.rate * f.channels * f.bits / 8);
  put16(body, f.channels * f.bits / 8);
  put16(body, f.bits);
  if (f.extensible) {
    put16(body, 22);
    put16(body, f.bits);
    put32(body, 4);
    put16(body, f.format);  // the sub-format GUID's first two bytes; the rest is fixed
    body.insert(body.end(), {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00,
                             0x38, 0x9B, 0x71});
  }
  tag(body, "data");
  put32(body, static_cast<uint32_t>(samples.size()));
  body.insert(body.end(), samples.begin(), samples.end());
  std::vector<uint8_t> out;
  tag(out, "RIFF");
  put32(out, static_cast<uint32_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<uint8_t> pcm16(const std::vector<int16_t>& values) {
  std::vector<uint8_t> out;
  for (int16_t v : values) put16(out, static_cast<uint16_t>(v));
  return out;
}

std::string error_of(const std::vector<uint8_t>& file) {
  auto result = decode_wav(file.data(), file.size());
  EXPECT_FALSE(result.ok());
  if (result.ok()) return "";
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  return result.error().message;
}

TEST(Wav, Pcm16IsScaledBy32768) {
  const auto file = wav({}, pcm16({0, 16384, -32768, 32767, -1}));
  auto samples = decode_wav(file.data(), file.size());
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  const std::vector<float> expected{0.0f, 0.5f, -1.0f, 32767.0f / 32768.0f, -1.0f / 32768.0f};
  EXPECT_EQ(*samples, expected);
}

TEST(Wav, FloatIsReadAsStored) {
  const std::vector<float> values{0.25f, -0.125f, 1.5f};
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian hosts
  for (bool extensible : {false, true}) {
    Format f;
    f.format = 3;
    f.bits = 32;
    f.extensible = extensible;
    const auto file = wav(f, bytes);
    auto samples = decode_wav(file.data(), file.size());
    ASSERT_TRUE(samples.ok()) << samples.error().message;
    EXPECT_EQ(*samples, values);
  }
}

TEST(Wav, EmptyDataIsNoSamples) {
  const auto file = wav({}, {});
  auto samples = decode_wav(file.data(), file.size());
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  EXPECT_TRUE(samples->empty());
}

TEST(Wav, OtherFilesAreClearErrors) {
  const auto tone = pcm16({1, 2, 3, 4});
  Format rate;
  rate.rate = 44100;
  EXPECT_NE(error_of(wav(rate, tone)).find("44100 Hz"), std::string::npos);
  Format stereo;
  stereo.channels = 2;
  EXPECT_NE(error_of(wav(stereo, tone)).find("mono"), std::string::npos);
  Format eight;
  eight.bits = 8;
  EXPECT_NE(error_of(wav(eight, tone)).find("8-bit integer PCM"), std::string::npos);
  Format alaw;
  alaw.format = 6;
  alaw.bits = 8;
  EXPECT_NE(error_of(wav(alaw, tone)).find("format 6"), std::string::npos);

  auto truncated = wav({}, tone);
  truncated.resize(truncated.size() - 3);
  EXPECT_NE(error_of(truncated).find("truncated"), std::string::npos);
  auto odd = wav({}, pcm16({1}));
  odd.pop_back();
  odd[odd.size() - 5] = 1;  // the data chunk's size: one byte, half a sample
  EXPECT_NE(error_of(odd).find("whole number"), std::string::npos);
  const std::string text = "not a wave file at all";
  EXPECT_NE(error_of(std::vector<uint8_t>(text.begin(), text.end())).find("not a WAV file"),
            std::string::npos);
}

TEST(Wav, MissingFileIsNotFound) {
  auto samples = decode_wav_file("/nonexistent/clip.wav");
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.error().code, ErrorCode::kNotFound);
}

TEST(Wav, SpecialFilesAreRefusedWithoutBlocking) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("rne_wav_special_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "clip.wav").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
           {fifo, "a FIFO (named pipe)"},
           {dir.string(), "a directory"},
           {"/dev/zero", "a character device"}}) {
    auto decoded = std::async(std::launch::async, [&] { return decode_wav_file(path); });
    if (decoded.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // Blocked in open: a writer's open and close lets it go, so the test ends.
      ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
      FAIL() << path << " blocked the read";
    }
    auto samples = decoded.get();
    ASSERT_FALSE(samples.ok()) << path;
    EXPECT_EQ(samples.error().code, ErrorCode::kNotFound);
    EXPECT_NE(samples.error().message.find(kind + ", not a regular file"), std::string::npos)
        << samples.error().message;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rne::media

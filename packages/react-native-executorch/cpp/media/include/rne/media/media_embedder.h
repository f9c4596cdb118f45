// Images and audio in a prompt: a picture file, a WAV file or raw samples becomes the decoder's
// input for its soft tokens. Decodes and preprocesses a picture with the vision encoder's own
// contract (rne/media/image.h) and runs rne::runner::VisionEncoder; reads a WAV clip
// (rne/media/audio.h) and runs rne::runner::AudioEncoder, whose program does the feature
// transform. The result is the item's tokens (begin marker, soft tokens, end marker) and a
// runner::MediaSpan with its rows. See docs/multimodal.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "rne/runner/audio_encoder.h"
#include "rne/runner/result.h"
#include "rne/runner/text_generator.h"
#include "rne/runner/vision_encoder.h"

namespace rne::media {

// A kind of media's marker ids (Gemma4Config: boi/image/eoi, boa/audio/eoa).
struct MediaTokens {
  int64_t begin;
  int64_t soft;
  int64_t end;
};
inline constexpr MediaTokens kGemma4Image{255999, 258880, 258882};
inline constexpr MediaTokens kGemma4Audio{256000, 258881, 258883};

// One item in a prompt: `tokens` (begin, `span.count` soft tokens, end) and the span's rows.
struct PromptMedia {
  std::vector<int64_t> tokens;
  runner::MediaSpan span;  // offset 1: relative to `tokens`
  double encode_ms = 0;    // 0 when the rows came from the cache
};

class MediaEmbedder {
 public:
  // Either encoder may be null: that kind of media is then an error saying so.
  MediaEmbedder(std::unique_ptr<runner::VisionEncoder> vision,
                std::unique_ptr<runner::AudioEncoder> audio);

  bool takes_images() const { return vision_ != nullptr; }
  bool takes_audio() const { return audio_ != nullptr; }
  const runner::VisionEncoder* vision() const { return vision_.get(); }
  const runner::AudioEncoder* audio() const { return audio_.get(); }

  // The item's tokens and rows. The content's hash (the file's bytes, or the samples') is the
  // span's key, and the rows of the last few items are kept under it, so a conversation re-sent
  // every turn encodes each item once. Errors: kNotFound (unreadable file), kInvalidArgument
  // (no encoder for the kind; a picture that is not a readable JPEG/PNG; a clip that is not
  // 16 kHz mono WAV, is empty, too short or too long: each message says what to do), and the
  // encoders' own errors.
  runner::Result<PromptMedia> image(const std::string& path);
  runner::Result<PromptMedia> audio_file(const std::string& path);
  runner::Result<PromptMedia> audio(const float* samples, size_t count);
  // The number of prompt tokens the call above gives, without encoding anything.
  runner::Result<int64_t> count_image(const std::string& path) const;
  runner::Result<int64_t> count_audio_file(const std::string& path) const;
  runner::Result<int64_t> count_audio(size_t count) const;

 private:
  using Encode = std::function<runner::Result<std::vector<float>>()>;
  // The cached rows under `key`, or encode() them; then the item's tokens around them.
  runner::Result<PromptMedia> embed(uint64_t key, const MediaTokens& tokens, int64_t width,
                                    const Encode& encode);
  runner::Result<void> check_audio(size_t count) const;
  struct Cached {
    uint64_t key;
    std::shared_ptr<const std::vector<float>> rows;
  };
  static constexpr size_t kCacheSize = 4;
  std::unique_ptr<runner::VisionEncoder> vision_;
  std::unique_ptr<runner::AudioEncoder> audio_;
  std::list<Cached> cache_;  // most recent first
};

}  // namespace rne::media

#include "rne/media/media_embedder.h"

#include <chrono>
#include <utility>

#include "rne/media/audio.h"
#include "rne/media/image.h"

namespace rne::media {

using runner::Error;
using runner::ErrorCode;
using runner::Result;

namespace {

// FNV-1a over the content's bytes: an item's identity in the KV cache and the row cache.
uint64_t content_key(const void* data, size_t size, uint64_t kind) {
  uint64_t hash = 14695981039346656037ull ^ kind;
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash == 0 ? 1 : hash;  // 0 means "text" in a MediaSpan
}

Error no_encoder(const char* what) {
  return Error{ErrorCode::kInvalidArgument,
               std::string("this model was loaded without its ") + what +
                   " encoder, so it cannot take " + (what[0] == 'v' ? "images" : "audio") +
                   ": load it with the encoder program of a model that has the capability"};
}

Gemma4ImageConfig image_config(const runner::VisionEncoder& encoder) {
  const auto& contract = encoder.contract();
  Gemma4ImageConfig config;
  config.max_soft_tokens = static_cast<int>(contract.max_soft_tokens);
  config.patch_size = static_cast<int>(contract.patch_size);
  config.pooling_kernel_size = static_cast<int>(contract.pooling_kernel_size);
  return config;
}

}  // namespace

MediaEmbedder::MediaEmbedder(std::unique_ptr<runner::VisionEncoder> vision,
                             std::unique_ptr<runner::AudioEncoder> audio)
    : vision_(std::move(vision)), audio_(std::move(audio)) {}

Result<int64_t> MediaEmbedder::count_image(const std::string& path) const {
  if (vision_ == nullptr) return no_encoder("vision");
  auto bytes = read_image_file(path);
  if (!bytes.ok()) return bytes.error();
  auto size = image_size(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  if (!size.ok()) return Error{size.error().code, path + ": " + size.error().message};
  const Gemma4ImageConfig config = image_config(*vision_);
  auto target = gemma4_target_size(size->height, size->width, config);
  if (!target.ok()) return target.error();
  const int64_t patches = static_cast<int64_t>(target->height / config.patch_size) *
                          (target->width / config.patch_size);
  return patches / (config.pooling_kernel_size * config.pooling_kernel_size) + 2;
}

Result<void> MediaEmbedder::check_audio(size_t count) const {
  if (audio_ == nullptr) return no_encoder("audio");
  const auto& contract = audio_->contract();
  const double seconds = static_cast<double>(contract.max_samples) / contract.sample_rate;
  if (count == 0) {
    return Error{ErrorCode::kInvalidArgument, "the audio clip is empty: record some sound first"};
  }
  if (static_cast<int64_t>(count) > contract.max_samples) {
    return Error{ErrorCode::kInvalidArgument,
                 "the audio clip has " + std::to_string(count) + " samples, over the model's " +
                     std::to_string(contract.max_samples) + " (" + std::to_string(seconds) +
                     " s at 16 kHz): split it into shorter clips"};
  }
  if (audio_->num_tokens(static_cast<int64_t>(count)) < 1) {
    return Error{ErrorCode::kInvalidArgument,
                 "the audio clip has " + std::to_string(count) +
                     " samples, too short for one audio token (40 ms at 16 kHz)"};
  }
  return {};
}

Result<int64_t> MediaEmbedder::count_audio(size_t count) const {
  if (auto ok = check_audio(count); !ok.ok()) return ok.error();
  return audio_->num_tokens(static_cast<int64_t>(count)) + 2;
}

Result<int64_t> MediaEmbedder::count_audio_file(const std::string& path) const {
  if (audio_ == nullptr) return no_encoder("audio");
  auto samples = decode_wav_file(path);
  if (!samples.ok()) return samples.error();
  return count_audio(samples->size());
}

Result<PromptMedia> MediaEmbedder::image(const std::string& path) {
  if (vision_ == nullptr) return no_encoder("vision");
  auto bytes = read_image_file(path);
  if (!bytes.ok()) return bytes.error();
  const uint64_t key = content_key(bytes->data(), bytes->size(), 'i');
  return embed(key, kGemma4Image, vision_->contract().text_hidden,
               [&]() -> Result<std::vector<float>> {
                 auto picture = decode_image(reinterpret_cast<const uint8_t*>(bytes->data()),
                                             bytes->size());
                 if (!picture.ok()) {
                   return Error{picture.error().code, path + ": " + picture.error().message};
                 }
                 auto input = gemma4_preprocess(*picture, image_config(*vision_));
                 if (!input.ok()) return input.error();
                 auto rows = vision_->encode(input->pixel_values, input->position_ids,
                                             input->num_soft_tokens);
                 if (!rows.ok()) return rows.error();
                 return std::move(rows->values);
               });
}

Result<PromptMedia> MediaEmbedder::audio_file(const std::string& path) {
  if (audio_ == nullptr) return no_encoder("audio");
  auto samples = decode_wav_file(path);
  if (!samples.ok()) return samples.error();
  return audio(samples->data(), samples->size());
}

Result<PromptMedia> MediaEmbedder::audio(const float* samples, size_t count) {
  if (auto ok = check_audio(count); !ok.ok()) return ok.error();
  const uint64_t key = content_key(samples, count * sizeof(float), 'a');
  return embed(key, kGemma4Audio, audio_->contract().text_hidden,
               [&]() -> Result<std::vector<float>> {
                 auto rows = audio_->encode(samples, count);
                 if (!rows.ok()) return rows.error();
                 return std::move(rows->values);
               });
}

Result<PromptMedia> MediaEmbedder::embed(uint64_t key, const MediaTokens& tokens, int64_t width,
                                         const Encode& encode) {
  PromptMedia out;
  std::shared_ptr<const std::vector<float>> rows;
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->key != key) continue;
    cache_.splice(cache_.begin(), cache_, it);  // most recent first
    rows = cache_.front().rows;
    break;
  }
  if (rows == nullptr) {
    const auto start = std::chrono::steady_clock::now();
    auto encoded = encode();
    if (!encoded.ok()) return encoded.error();
    out.encode_ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    rows = std::make_shared<const std::vector<float>>(std::move(encoded).value());
    cache_.push_front({key, rows});
    if (cache_.size() > kCacheSize) cache_.pop_back();
  }
  const auto count = static_cast<int64_t>(rows->size()) / width;
  out.tokens.reserve(static_cast<size_t>(count) + 2);
  out.tokens.push_back(tokens.begin);
  out.tokens.insert(out.tokens.end(), static_cast<size_t>(count), tokens.soft);
  out.tokens.push_back(tokens.end);
  out.span = runner::MediaSpan{1, count, key, std::move(rows)};
  return out;
}

}  // namespace rne::media

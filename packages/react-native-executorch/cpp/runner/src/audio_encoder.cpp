#include "rne/runner/audio_encoder.h"

#include "program_loader.h"

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

namespace rne::runner {

namespace et = ::executorch;
using et::extension::module::Module;

namespace {

const detail::EncoderKind kAudio{"an audio encoder",
                                     "export one with tools/export_encoder.py --encoder audio"};

Error contract_error(const std::string& path, const std::string& what) {
  return kAudio.contract_error(path, what);
}

// Feature frames whose window ends on real audio: transformers' feature extractor prepends
// half a frame of zeros and cuts windows of frame_length + 1 samples every hop_length.
int64_t real_frames(int64_t num_samples, int64_t frame_length, int64_t hop_length) {
  const int64_t span = num_samples + frame_length / 2 - (frame_length + 1);
  return span < 0 ? 0 : span / hop_length + 1;
}

std::string seconds(int64_t samples, int64_t rate) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", static_cast<double>(samples) / rate);
  return text;
}

}  // namespace

AudioEncoder::~AudioEncoder() = default;

Result<std::unique_ptr<AudioEncoder>> AudioEncoder::load(const std::string& path) {
  return detail::load_mapped<AudioEncoder>(path);
}

Result<std::unique_ptr<AudioEncoder>> AudioEncoder::load(std::shared_ptr<const ModelFile> file) {
  return detail::load_program(kAudio, std::move(file), {kTransformMethod, kMethod},
                              [](auto file, auto& opened) {
                                return finish_load(std::move(file), opened);
                              });
}

Result<std::unique_ptr<AudioEncoder>> AudioEncoder::finish_load(
    std::shared_ptr<const ModelFile> file, detail::OpenedProgram& opened) {
  const std::string path = file->path();
  std::unique_ptr<AudioEncoder> encoder(new AudioEncoder());
  encoder->path_ = path;
  encoder->file_ = std::move(file);
  encoder->module_ = std::move(opened.module);
  Module& module = *encoder->module_;

  AudioEncoderContract& c = encoder->contract_;
  if (auto read = detail::read_int_constants(kAudio, module, path,
                                             {{&c.sample_rate, "audio_sample_rate"},
                                              {&c.max_samples, "audio_max_samples"},
                                              {&c.max_frames, "audio_max_frames"},
                                              {&c.max_tokens, "audio_max_tokens"},
                                              {&c.num_mel_bins, "audio_num_mel_bins"},
                                              {&c.frame_length, "audio_frame_length"},
                                              {&c.hop_length, "audio_hop_length"},
                                              {&c.text_hidden, "audio_text_hidden"}},
                                             opened.methods.count("get_backend") > 0, c.backend_code);
      !read.ok()) {
    return read.error();
  }
  if (c.sample_rate < 1 || c.max_samples < 1 || c.frame_length < 2 || c.hop_length < 1 ||
      c.max_frames != real_frames(c.max_samples, c.frame_length, c.hop_length) ||
      c.max_tokens != ((c.max_frames + 1) / 2 + 1) / 2) {
    return contract_error(path, "inconsistent metadata: max_samples=" +
                                    std::to_string(c.max_samples) + " max_frames=" +
                                    std::to_string(c.max_frames) + " max_tokens=" +
                                    std::to_string(c.max_tokens));
  }

  // The signatures the constants promise: waveform [1, S] f32 and num_samples [1] i64 to
  // features [1, F, mel] f32 and mask [1, F] bool; those to embeddings [T, hidden] f32.
  using et::aten::ScalarType;
  auto is = [](const auto& meta, std::vector<int64_t> sizes, ScalarType type) {
    if (!meta.ok() || meta->scalar_type() != type || meta->sizes().size() != sizes.size()) {
      return false;
    }
    return std::equal(sizes.begin(), sizes.end(), meta->sizes().begin());
  };
  auto transform = module.method_meta(kTransformMethod);
  auto encode = module.method_meta(kMethod);
  if (!transform.ok() || transform->num_inputs() != 2 || transform->num_outputs() != 2 ||
      !is(transform->input_tensor_meta(0), {1, c.max_samples}, ScalarType::Float) ||
      !is(transform->input_tensor_meta(1), {1}, ScalarType::Long) ||
      !is(transform->output_tensor_meta(0), {1, c.max_frames, c.num_mel_bins},
          ScalarType::Float) ||
      !is(transform->output_tensor_meta(1), {1, c.max_frames}, ScalarType::Bool)) {
    return contract_error(path, "'speech_transform' must take (waveform f32 [1, " +
                                    std::to_string(c.max_samples) +
                                    "], num_samples i64 [1]) and return (features, mask)");
  }
  if (!encode.ok() || encode->num_inputs() != 2 || encode->num_outputs() != 1 ||
      !is(encode->input_tensor_meta(0), {1, c.max_frames, c.num_mel_bins}, ScalarType::Float) ||
      !is(encode->input_tensor_meta(1), {1, c.max_frames}, ScalarType::Bool) ||
      !is(encode->output_tensor_meta(0), {c.max_tokens, c.text_hidden}, ScalarType::Float)) {
    return contract_error(path, "'audio_encoder' must take speech_transform's (features, mask) "
                                "and return float32 embeddings [" +
                                    std::to_string(c.max_tokens) + ", " +
                                    std::to_string(c.text_hidden) + "]");
  }
  encoder->waveform_.assign(static_cast<size_t>(c.max_samples), 0.0f);
  return encoder;
}

int64_t AudioEncoder::num_tokens(int64_t num_samples) const {
  const int64_t frames = real_frames(num_samples, contract_.frame_length, contract_.hop_length);
  // Two stride-2 subsamplings (transformers: mask[::2][::2]).
  return ((frames + 1) / 2 + 1) / 2;
}

Result<Embeddings> AudioEncoder::encode(const float* samples, size_t count) {
  const AudioEncoderContract& c = contract_;
  const int64_t rate = c.sample_rate;
  if (count == 0) {
    return Error{ErrorCode::kInvalidArgument,
                 "audio encoder: the clip is empty; pass at least " +
                     std::to_string(c.frame_length / 2 + 1) + " samples of " +
                     std::to_string(rate) + " Hz mono audio"};
  }
  if (count > static_cast<size_t>(c.max_samples)) {
    return Error{ErrorCode::kInvalidArgument,
                 "audio encoder: the clip has " + std::to_string(count) + " samples (" +
                     seconds(static_cast<int64_t>(count), rate) + "); this encoder takes at most " +
                     std::to_string(c.max_samples) + " (" + seconds(c.max_samples, rate) +
                     "): split it into shorter clips"};
  }
  const int64_t tokens = num_tokens(static_cast<int64_t>(count));
  if (tokens < 1) {
    return Error{ErrorCode::kInvalidArgument,
                 "audio encoder: the clip has " + std::to_string(count) +
                     " samples, too short for one audio token; pass at least " +
                     std::to_string(c.frame_length / 2 + 1) + " samples"};
  }
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(samples[i])) {
      return Error{ErrorCode::kInvalidArgument,
                   "audio encoder: sample " + std::to_string(i) +
                       " is not a finite number; pass float PCM samples in [-1, 1]"};
    }
  }
  if (auto whole = file_->check_still_whole(); !whole.ok()) return whole.error();
  std::copy(samples, samples + count, waveform_.begin());
  std::fill(waveform_.begin() + static_cast<std::ptrdiff_t>(count), waveform_.end(), 0.0f);
  int64_t num_samples = static_cast<int64_t>(count);
  auto waveform = et::extension::from_blob(
      waveform_.data(), {1, static_cast<et::aten::SizesType>(c.max_samples)},
      et::aten::ScalarType::Float);
  auto length = et::extension::from_blob(&num_samples, {1}, et::aten::ScalarType::Long);
  auto features = module_->execute(kTransformMethod, {waveform, length});
  if (!features.ok()) {
    return detail::encoder_execution_failure(path_, kTransformMethod, features.error());
  }
  // speech_transform's outputs (its planned buffers) are audio_encoder's inputs as they are.
  auto out = module_->execute(kMethod, {features->at(0), features->at(1)});
  if (!out.ok()) return detail::encoder_execution_failure(path_, kMethod, out.error());
  return detail::output_embeddings(kAudio, path_, kMethod, out->at(0).toTensor(), c.max_tokens,
                                   tokens, c.text_hidden);
}

}  // namespace rne::runner

// A loaded audio encoder: the `speech_transform` and `audio_encoder` methods of a .pte written
// by `tools/export_encoder.py --encoder audio` (Gemma 4's feature extractor, audio tower and its
// projection into the text embedding space). It takes one clip of 16 kHz mono float samples and
// returns the embeddings that replace the clip's audio soft tokens in the decoder's input, in
// order; the program does the feature transform, so no signal processing is written here. See
// docs/multimodal.md.
#pragma once

#include <cstddef>

#include "rne/runner/encoder_decls.h"

namespace rne::runner {

// What the program declares (its constant methods, checked against its input and output shapes).
struct AudioEncoderContract {
  int64_t sample_rate = 0;   // audio_sample_rate: 16000
  int64_t max_samples = 0;   // audio_max_samples: the longest clip (speech_transform's input)
  int64_t max_frames = 0;    // audio_max_frames: feature frames of a clip of max_samples
  int64_t max_tokens = 0;    // audio_max_tokens: audio_encoder's output rows
  int64_t num_mel_bins = 0;  // audio_num_mel_bins
  int64_t frame_length = 0;  // audio_frame_length: samples per feature frame
  int64_t hop_length = 0;    // audio_hop_length: samples between frames
  int64_t text_hidden = 0;   // audio_text_hidden: the decoder's embedding width
  int64_t backend_code = -1;  // get_backend, when the exporter wrote it
};

class AudioEncoder {
 public:
  static constexpr const char* kTransformMethod = "speech_transform";
  static constexpr const char* kMethod = "audio_encoder";

  // Memory-maps `path` (ModelFile::Hold::kMapped), checks it is a .pte with both methods of the
  // expected signatures and reads the contract. Errors: kNotFound (no such file), kInvalidModel
  // (naming the file and what is missing or malformed).
  static Result<std::unique_ptr<AudioEncoder>> load(const std::string& path);
  static Result<std::unique_ptr<AudioEncoder>> load(std::shared_ptr<const ModelFile> file);
  ~AudioEncoder();
  AudioEncoder(const AudioEncoder&) = delete;
  AudioEncoder& operator=(const AudioEncoder&) = delete;

  const AudioEncoderContract& contract() const { return contract_; }
  const std::string& path() const { return path_; }

  // The audio soft tokens a clip of `num_samples` becomes (what transformers' processor puts
  // between <start_of_audio> and <end_of_audio>): one per 4 feature frames, about 40 ms; 0 for
  // a clip of at most half a frame. Known before anything runs, for the prompt's token count.
  int64_t num_tokens(int64_t num_samples) const;

  // Runs the feature transform and the encoder on one clip of `count` samples (16 kHz, mono,
  // float, nominally in [-1, 1]). Errors: kInvalidArgument for an empty clip, one too short for
  // a token, one longer than max_samples (split it) or a non-finite sample; kExecutionFailed
  // when the runtime fails or produces non-finite values.
  Result<Embeddings> encode(const float* samples, size_t count);

 private:
  AudioEncoder() = default;
  // The encoder of an opened program, its contract read and checked (program_loader.h).
  static Result<std::unique_ptr<AudioEncoder>> finish_load(std::shared_ptr<const ModelFile> file,
                                                     detail::OpenedProgram& opened);
  std::string path_;
  std::shared_ptr<const ModelFile> file_;
  std::unique_ptr<executorch::extension::module::Module> module_;
  AudioEncoderContract contract_;
  std::vector<float> waveform_;  // [max_samples]: the clip, zero-padded
};

}  // namespace rne::runner

"""Gemma 4's audio path as two exportable modules, and transformers' own path as their reference.

What transformers 5.23 does to a clip (16 kHz mono float samples):

- ``Gemma4AudioFeatureExtractor``: zero-pad the clip to a multiple of 128 samples, prepend 160
  zeros (half a frame, "semicausal"), cut 20 ms frames (320 samples) every 10 ms (160), each
  frame times a periodic Hann window, ``|rfft|`` over 512 points (float32), a 128-band HTK mel
  filterbank (no norm, 0 to 8 kHz), ``log(mel + 1e-3)``. A frame is real when the last sample
  of its 321-sample unfold window is real audio; the other frames are zeroed and masked. Clips
  past 480 000 samples (30 s) are cut to that, silently.
- ``Gemma4Model.get_audio_features``: the audio tower (``Gemma4AudioModel``: two stride-2
  conv + LayerNorm + ReLU blocks over (time, mel), masking the frames before each; a linear into
  the conformer width; conformer layers of feed-forward, chunked local self-attention with a
  relative position bias and logit soft-capping, a causal depthwise convolution, feed-forward;
  ``output_proj``) then ``embed_audio`` (an unscaled RMSNorm and a linear into the text width).
  transformers keeps the rows whose subsampled mask is set (``mask[::2][::2]``): a clip whose
  features have ``F`` real frames becomes ``ceil(ceil(F / 2) / 2)`` audio soft tokens, one per
  40 ms (750 for 30 s).

``SpeechTransform`` computes the feature extractor's arithmetic with exportable operations: the
framing, window and real DFT as one strided convolution whose kernels are the windowed cosine and
sine rows (a constant), the magnitude, the filterbank as a matmul and the log, in float32 (numpy's
rfft here is float32 too; the filterbank and log are float64 there). ``AudioEncoder`` calls
transformers' own tower submodules in transformers' order on a fixed number of frames; its
attention mask is built from the frame mask with transformers' own sliding-window rule, so the
real rows are computed as transformers computes them and the rows past the clip's tokens are
zero. Frames after the real ones never reach a real row: the subsampling masks them and the
conformer's attention and causal convolution only look at real or earlier frames.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from rne_tools.encoders.gemma4_reference import replace_clamps_and_norms
from rne_tools.errors import ExportError, RneError

SAMPLE_RATE = 16_000
# transformers' feature extractor cuts clips at 480 000 samples and its processor caps a clip at
# 750 soft tokens: 30 s is the most E2B takes in one clip.
MAX_SECONDS = 30
# The shortest clip with a real feature frame: more than half a frame (160 samples).
_MIN_SAMPLES = 161


class AudioClipError(RneError):
    """A clip the audio encoder cannot take (empty, too long, not mono float samples)."""


def feature_extractor() -> Any:
    """transformers' Gemma 4 feature extractor with its defaults (those of E2B's processor)."""
    from transformers import Gemma4AudioFeatureExtractor

    return Gemma4AudioFeatureExtractor()


def num_frames(num_samples: int, frame_length: int = 320, hop_length: int = 160) -> int:
    """Real feature frames of a clip of ``num_samples``: frames whose window ends on real audio
    (the feature extractor's mask; 0 for a clip of at most half a frame)."""
    unfold = frame_length + 1
    return max(0, (num_samples + frame_length // 2 - unfold) // hop_length + 1)


def num_audio_tokens(num_samples: int, frame_length: int = 320, hop_length: int = 160) -> int:
    """Audio soft tokens of a clip: two stride-2 subsamplings of its real frames (what
    ``Gemma4Processor`` puts between ``boa`` and ``eoa``)."""
    frames = num_frames(num_samples, frame_length, hop_length)
    return (((frames + 1) // 2) + 1) // 2


def reference_features(waveform: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' features for one clip: ``input_features[1, F, 128]`` f32 and
    ``input_features_mask[1, F]`` bool, ``F`` from the clip padded to a multiple of 128."""
    out = feature_extractor()([np.asarray(waveform, np.float32)], return_tensors="pt")
    return out["input_features"], out["input_features_mask"]


def reference_audio_embeddings(model: nn.Module, features: torch.Tensor,
                               mask: torch.Tensor) -> torch.Tensor:
    """transformers' own audio embeddings for one clip, ``[num_tokens, text_hidden]``: the rows
    ``Gemma4Model.forward`` scatters into the audio token positions."""
    with torch.no_grad():
        out = model.model.get_audio_features(features, mask, return_dict=True)
    return out.pooler_output[out.attention_mask]


class SpeechTransform(nn.Module):
    """``speech_transform(waveform[1, S] f32, num_samples[1] i64) -> (features[1, F, mel] f32,
    mask[1, F] bool)``: the feature extractor on a clip zero-padded to ``S`` samples, of which
    the first ``num_samples`` are real. ``F = num_frames(S)``; frames past the clip's are zero
    and unmasked, as transformers returns them."""

    def __init__(self, extractor: Any, max_samples: int) -> None:
        super().__init__()
        unsupported = {
            "dither": extractor.dither != 0.0,  # random noise: not a function of the clip
            "preemphasis": extractor.preemphasis != 0.0,
        }
        if any(unsupported.values()):
            names = ", ".join(k for k, v in unsupported.items() if v)
            raise ExportError(f"the feature extractor's {names} is not supported in the export.")
        self.frame_length = extractor.frame_length
        self.hop_length = extractor.hop_length
        self.pad_left = extractor.frame_length // 2
        self.max_samples = max_samples
        self.frames = num_frames(max_samples, self.frame_length, self.hop_length)
        if self.frames < 1:
            raise ExportError(f"max_samples={max_samples} holds no feature frame.")
        self.scale = float(extractor.input_scale_factor)
        fft = extractor.fft_length
        bins = fft // 2 + 1
        # rfft over fft points of a frame zero-padded from frame_length: the cosine and sine
        # rows over the frame's samples, times the extractor's Hann window.
        n = np.arange(self.frame_length, dtype=np.float64)
        k = np.arange(bins, dtype=np.float64)
        angle = 2.0 * np.pi * np.outer(k, n) / fft
        window = extractor.window.astype(np.float64)
        kernels = np.concatenate([np.cos(angle) * window, -np.sin(angle) * window])
        # Persistent: with non-persistent buffers the lowered program failed its signature check.
        self.register_buffer("dft", torch.tensor(kernels, dtype=torch.float32)[:, None, :])
        self.register_buffer("mel_filters",
                             torch.tensor(extractor.mel_filters, dtype=torch.float32))
        self.mel_floor = float(extractor.mel_floor)
        for name in ("per_bin_mean", "per_bin_stddev"):
            value = getattr(extractor, name)
            self.register_buffer(
                name, None if value is None else torch.tensor(value, dtype=torch.float32).reshape(-1))
        self.bins = bins

    def forward(self, waveform: torch.Tensor,
                num_samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = waveform * self.scale if self.scale != 1.0 else waveform
        x = nn.functional.pad(x, (self.pad_left, 0))[:, None, :]
        spectrum = nn.functional.conv1d(x, self.dft, stride=self.hop_length)
        spectrum = spectrum[:, :, : self.frames].transpose(1, 2)
        real, imag = spectrum[..., : self.bins], spectrum[..., self.bins:]
        magnitude = torch.sqrt(real * real + imag * imag)
        features = torch.log(torch.matmul(magnitude, self.mel_filters) + self.mel_floor)
        if self.per_bin_mean is not None:
            features = features - self.per_bin_mean
        if self.per_bin_stddev is not None:
            features = features / self.per_bin_stddev
        # Frame i's unfold window ends at sample i * hop + frame_length - pad_left of the clip.
        ends = torch.arange(self.frames) * self.hop_length + (self.frame_length - self.pad_left)
        mask = ends[None, :] < num_samples[:, None]
        return torch.where(mask[..., None], features, 0.0), mask


class AudioEncoder(nn.Module):
    """``audio_encoder(features[1, F, mel] f32, mask[1, F] bool) -> [T, text_hidden] f32``,
    ``T = ceil(ceil(F / 2) / 2)``: transformers' audio tower and ``embed_audio`` with a fixed
    output shape (the rows past the clip's tokens are zero; see the module docstring)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.tower = model.model.audio_tower
        self.embed = model.model.embed_audio
        config = self.tower.config
        self.chunk = config.attention_chunk_size
        self.past = config.attention_context_left - 1
        self.future = config.attention_context_right

    def _blocked_mask(self, valid: torch.Tensor) -> torch.Tensor:
        """``[1, 1, blocks, chunk, context]`` bool, True where a key is masked: transformers'
        ``create_bidirectional_mask`` with its sliding-window rule over the real frames, in the
        blocked layout of ``_convert_4d_mask_to_blocked_5d`` (keys outside the sequence masked)."""
        from transformers.models.gemma4.modeling_gemma4 import sliding_window_mask_function

        length = valid.shape[-1]
        blocks = (length + self.chunk - 1) // self.chunk
        context = self.chunk + self.past + self.future
        query = (torch.arange(blocks)[:, None] * self.chunk + torch.arange(self.chunk))[..., None]
        key = (torch.arange(blocks)[:, None, None] * self.chunk - self.past
               + torch.arange(context)[None, None, :])
        window = sliding_window_mask_function((self.past, self.future))(0, 0, query, key)
        # Keys before the first frame or past the last are padding: False.
        padded = nn.functional.pad(valid[0], (self.past, blocks * self.chunk + context - length),
                                   value=False)
        allowed = window & padded[key + self.past]
        return ~allowed[None, None]

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        tower = self.tower
        hidden, valid = tower.subsample_conv_projection(features, mask)
        position_embeddings = tower.rel_pos_enc(hidden)
        blocked = self._blocked_mask(valid)
        for layer in tower.layers[: tower.config.num_hidden_layers]:
            hidden = layer(hidden, attention_mask=blocked, position_embeddings=position_embeddings)
        hidden = tower.output_proj(hidden)
        embeddings = self.embed(inputs_embeds=hidden)
        return torch.where(valid[..., None], embeddings, 0.0)[0]


def for_xnnpack(encoder: AudioEncoder) -> AudioEncoder:
    """A copy rewritten into forms ExecuTorch's XNNPACK partitioner takes, computing the same
    function (the export checks it against transformers): the clipped linears' bounds as scalars
    and the RMSNorms over a 4-D view (``gemma4_reference.replace_clamps_and_norms``)."""
    encoder = copy.deepcopy(encoder)
    if encoder.tower.config.hidden_act not in ("silu", "swish"):
        raise ExportError(
            f"audio hidden_act {encoder.tower.config.hidden_act!r} is not supported (silu)."
        )
    replace_clamps_and_norms(encoder)
    return encoder


def max_samples_for(seconds: int) -> int:
    if not 1 <= seconds <= MAX_SECONDS:
        raise ExportError(
            f"max_seconds={seconds}: Gemma 4's feature extractor and processor take clips of 1 "
            f"to {MAX_SECONDS} s; choose a length in that range."
        )
    return seconds * SAMPLE_RATE


def clip_inputs(clip: np.ndarray, max_samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``speech_transform``'s inputs for one clip: the samples zero-padded to ``max_samples``
    (``[1, max_samples]`` f32) and their count (``[1]`` i64). An empty clip, one too short for a
    token, one longer than the program takes (transformers would cut it silently) or one that
    is not 1-D is an ``AudioClipError``."""
    clip = np.asarray(clip)
    if clip.ndim != 1:
        raise AudioClipError(
            f"the clip has shape {clip.shape}; pass mono samples as a 1-D array "
            "(mix the channels down first).")
    if clip.size == 0:
        raise AudioClipError("the clip is empty; pass at least one sample of 16 kHz audio.")
    if num_audio_tokens(clip.size) == 0:
        raise AudioClipError(
            f"the clip has {clip.size} samples, too short for one audio token; pass at least "
            f"{_MIN_SAMPLES} samples ({_MIN_SAMPLES / SAMPLE_RATE * 1000:.0f} ms) of 16 kHz audio.")
    if clip.size > max_samples:
        raise AudioClipError(
            f"the clip has {clip.size} samples ({clip.size / SAMPLE_RATE:.2f} s), over the "
            f"{max_samples} ({max_samples / SAMPLE_RATE:g} s) the encoder takes; split it into "
            "clips of at most that length.")
    waveform = torch.zeros(1, max_samples)
    waveform[0, : clip.size] = torch.from_numpy(clip.astype(np.float32))
    return waveform, torch.tensor([clip.size], dtype=torch.int64)

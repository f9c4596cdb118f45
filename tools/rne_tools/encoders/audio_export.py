"""Export Gemma 4's audio path to a verified ``.pte`` with ``speech_transform`` and
``audio_encoder`` methods (the machinery is ``rne_tools.encoders.export``'s).

The program (XNNPACK; fp32, or the encoder's linears quantized as ``rne_tools.encoders.export``
says; the feature transform stays float), for clips of at most ``S = max_seconds * 16000`` samples:

- ``speech_transform(waveform[1, S] f32, num_samples[1] i64) -> (features[1, F, 128] f32,
  mask[1, F] bool)``: transformers' feature extractor on the clip's first ``num_samples``
  samples, the rest of the buffer zero; ``F`` frames, those past the clip's zero and unmasked.
- ``audio_encoder(features[1, F, 128] f32, mask[1, F] bool) -> [T, text_hidden] f32``:
  transformers' audio tower and ``embed_audio``; row ``i < num_audio_tokens(num_samples)`` is
  the embedding of the clip's ``i``-th audio token, the rows after are zero.
- constant methods ``audio_sample_rate``, ``audio_max_samples``, ``audio_max_frames``,
  ``audio_max_tokens``, ``audio_num_mel_bins``, ``audio_frame_length``, ``audio_hop_length``,
  ``audio_text_hidden`` and ``get_backend``: the contract the runner checks and counts tokens
  with.

Verification runs both methods on the ExecuTorch Python runtime for a few generated clips (a
sine, noise, silence, a short chirp with most of the buffer padding, a clip of the maximum
length) and compares with transformers' own feature extractor and ``get_audio_features``: the
features within ``FEATURE_BOUND``, the embeddings of the program's encoder on transformers'
features and on the program's own features within ``PARITY_BOUND`` times the std of the
reference embeddings (the quantization's bound for a quantized program), the masks equal and
the padding zero; otherwise nothing is written.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Unpack

import numpy as np
import torch

from rne_tools.encoders.export import (
    PARITY_BOUND,
    SHARED_CODE,
    CacheRequest,
    Encoder,
    EncoderExportResult,
    EncoderTrace,
    agreement,
    cached_encoder,
    check_quantization,
    finish_encoder_export,
    load_runtime,
    quantized_reference,
    row_cosines,
    summarize,
    trace_encoder,
)
from rne_tools.encoders.gemma4_audio import (
    MAX_SECONDS,
    SAMPLE_RATE,
    AudioEncoder,
    SpeechTransform,
    clip_inputs,
    feature_extractor,
    for_xnnpack,
    max_samples_for,
    num_audio_tokens,
    num_frames,
    reference_audio_embeddings,
    reference_features,
)
from rne_tools.encoders.gemma4_reference import reference_model

AUDIO_CODE = (*SHARED_CODE, "encoders/gemma4_audio.py", "encoders/audio_export.py")
TRANSFORM = "speech_transform"
ENCODER = "audio_encoder"
# Log-mel units (the features span about -6.9 to +5). Float32 rounding alone: transformers'
# float32 rfft is up to 2.8e-4 from a float64 evaluation on the tones, the program's DFT as a
# convolution up to 7.1e-4 (bands far from a tone sit near the 1e-3 floor, where the log
# magnifies the rounding); noise and silence under 1e-5.
FEATURE_BOUND = 2e-3
# Probe clips (name, seconds; None = the program's maximum length).
PROBE_CLIPS: tuple[tuple[str, float | None], ...] = (
    ("sine", 3.0), ("noise", 7.3), ("silence", 2.0), ("chirp", 0.37), ("mix", None),
)


def probe_clip(kind: str, num_samples: int, seed: int) -> np.ndarray:
    """A float32 mono clip at 16 kHz in [-1, 1]: a 440 Hz sine, white noise, silence, a 200 Hz
    to 4 kHz chirp, or a mix of tones, noise and a silent gap."""
    rng = np.random.default_rng(seed)
    t = np.arange(num_samples) / SAMPLE_RATE
    if kind == "sine":
        clip = 0.5 * np.sin(2 * np.pi * 440.0 * t)
    elif kind == "noise":
        clip = 0.3 * rng.standard_normal(num_samples)
    elif kind == "silence":
        clip = np.zeros(num_samples)
    elif kind == "chirp":
        duration = max(t[-1], 1e-3) if num_samples else 1.0
        clip = 0.6 * np.sin(2 * np.pi * (200.0 * t + (3800.0 / (2 * duration)) * t * t))
    elif kind == "mix":
        clip = (0.3 * np.sin(2 * np.pi * 300.0 * t) + 0.2 * np.sin(2 * np.pi * 2500.0 * t)
                + 0.05 * rng.standard_normal(num_samples))
        clip[num_samples // 3: num_samples // 2] = 0.0
    else:
        raise ValueError(f"unknown probe clip {kind!r}")
    return np.clip(clip, -1.0, 1.0).astype(np.float32)


def _probe_length(seconds: float | None, max_samples: int) -> int:
    return max_samples if seconds is None else min(int(seconds * SAMPLE_RATE), max_samples)


def _pad_frames(x: torch.Tensor, frames: int) -> torch.Tensor:
    """transformers' features (``[1, F', ...]``, ``F'`` from the clip padded to 128 samples)
    at the program's ``F`` frames: zero (or False) after the clip's frames."""
    if x.shape[1] >= frames:
        return x[:, :frames]
    pad = [0, 0] * (x.dim() - 2) + [0, frames - x.shape[1]]
    return torch.nn.functional.pad(x, pad)


def compare_clip(features: torch.Tensor, mask: torch.Tensor, on_reference: torch.Tensor,
                 end_to_end: torch.Tensor, ref_features: torch.Tensor, ref_mask: torch.Tensor,
                 reference: torch.Tensor, bound: float = PARITY_BOUND,
                 expected: torch.Tensor | None = None) -> dict[str, Any]:
    """Parity of one clip: the program's features and mask against transformers' (padded to
    the program's frames), and its embeddings, from transformers' features and from its own,
    against ``expected`` (max |diff| within ``bound`` x its std; default transformers'
    embeddings ``reference``; a quantized program's eager encoder's rows), with the end-to-end
    rows' agreement with ``reference`` beside."""
    count = reference.shape[0]
    agreed = agreement(end_to_end[:count], reference)
    reference = reference if expected is None else expected
    frames = int(ref_mask.sum())
    ref_features, ref_mask = (_pad_frames(t, features.shape[1]) for t in (ref_features, ref_mask))
    feature_diff = float((features[0, :frames] - ref_features[0, :frames]).abs().max())
    scale = float(reference.std())
    diff_ref = float((on_reference[:count] - reference).abs().max())
    diff_own = float((end_to_end[:count] - reference).abs().max())
    padding = max(float(features[0, frames:].abs().max()) if features.shape[1] > frames else 0.0,
                  float(end_to_end[count:].abs().max()) if end_to_end.shape[0] > count else 0.0)
    diff = max(diff_ref, diff_own)
    return {
        "num_frames": frames,
        "num_tokens": count,
        "feature_max_abs_diff": feature_diff,
        "mask_equal": bool(torch.equal(mask, ref_mask)),
        "encoder_max_abs_diff": diff_ref,
        "end_to_end_max_abs_diff": diff_own,
        "max_abs_diff": diff,
        "reference_std": scale,
        "relative": diff / scale,
        # End to end: what the decoder receives.
        **row_cosines(end_to_end[:count], reference),
        "max_abs_padding": padding,
        "passed": (feature_diff <= FEATURE_BOUND and bool(torch.equal(mask, ref_mask))
                   and diff <= bound * scale and padding == 0.0),
        **({} if expected is None else {"fp32_agreement": agreed}),
    }


def run_clip(program: Any, clip: np.ndarray, max_samples: int
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The program on one clip: features, mask and embeddings (``program`` is an ExecuTorch
    ``Program`` with both methods)."""
    waveform, num_samples = clip_inputs(clip, max_samples)
    features, mask = program.load_method(TRANSFORM).execute((waveform, num_samples))
    embeddings = program.load_method(ENCODER).execute((features, mask))[0]
    return features, mask, embeddings


def _verify(pte: Path, model: torch.nn.Module, max_samples: int, quantization: str,
            quantized: torch.nn.Module | None) -> dict[str, Any]:
    """``quantized``: the eager encoder with the program's quantized weights (None for fp32,
    whose reference is transformers' own)."""
    bound = check_quantization(quantization)
    program = load_runtime(pte)
    encoder = program.load_method(ENCODER)
    frames = num_frames(max_samples)
    probes = []
    for i, (kind, seconds) in enumerate(PROBE_CLIPS):
        clip = probe_clip(kind, _probe_length(seconds, max_samples), seed=i)
        features, mask, end_to_end = run_clip(program, clip, max_samples)
        ref_features, ref_mask = reference_features(clip)
        on_reference = encoder.execute((_pad_frames(ref_features, frames),
                                        _pad_frames(ref_mask, frames)))[0]
        reference = reference_audio_embeddings(model, ref_features, ref_mask)
        expected = None
        if quantized is not None:
            with torch.no_grad():
                expected = quantized(_pad_frames(ref_features, frames),
                                     _pad_frames(ref_mask, frames))[: reference.shape[0]]
        probes.append({"clip": kind, "num_samples": len(clip),
                       **compare_clip(features, mask, on_reference, end_to_end, ref_features,
                                      ref_mask, reference, bound, expected)})
    against = "transformers' eager" if quantized is None else "the quantized eager encoder"
    verification = summarize(
        probes,
        f"features max |diff| <= {FEATURE_BOUND}, masks equal; embeddings (on transformers' "
        f"features and on the program's) {quantization}: max |diff| against {against} <= "
        f"{bound} x std(its embeddings); padding == 0")
    verification["feature_max_abs_diff"] = max(p["feature_max_abs_diff"] for p in probes)
    return verification


def audio_stem(config: str, quantization: str, max_seconds: int) -> str:
    return f"gemma4_{config}_audio_xnnpack_{quantization}_{max_seconds}s"


def trace_audio_encoder(config: str, *, max_seconds: int = MAX_SECONDS,
                        quantization: str = "fp32", seed: int = 0) -> EncoderTrace:
    """The audio path of the random multimodal ``config``, its encoder quantized, traced.
    Raises ``ExportError`` on bad options."""
    max_samples = max_samples_for(max_seconds)
    check_quantization(quantization)
    started = time.perf_counter()
    model = reference_model(config, seed)
    extractor = feature_extractor()
    frames = num_frames(max_samples)
    tokens = num_audio_tokens(max_samples)
    text_hidden = model.config.text_config.hidden_size
    transform = SpeechTransform(extractor, max_samples).eval()
    encoder = for_xnnpack(AudioEncoder(model).eval())
    quantized = quantized_reference(encoder, quantization)
    waveform, num_samples = clip_inputs(probe_clip("sine", max_samples // 2, 0), max_samples)
    with torch.no_grad():
        features, mask = transform(waveform, num_samples)
    return trace_encoder(
        audio_stem(config, quantization, max_seconds),
        {TRANSFORM: (transform, (waveform, num_samples)), ENCODER: (encoder, (features, mask))},
        {
            "audio_sample_rate": SAMPLE_RATE,
            "audio_max_samples": max_samples,
            "audio_max_frames": frames,
            "audio_max_tokens": tokens,
            "audio_num_mel_bins": extractor.feature_size,
            "audio_frame_length": extractor.frame_length,
            "audio_hop_length": extractor.hop_length,
            "audio_text_hidden": text_hidden,
        },
        started=started, config=config, seed=seed, model=model, quantization=quantization,
        quantized=quantized,
        describe={
            "methods": [TRANSFORM, ENCODER],
            "max_seconds": max_seconds,
            "max_samples": max_samples,
            "max_frames": frames,
            "max_tokens": tokens,
            "num_mel_bins": extractor.feature_size,
            "text_hidden": text_hidden,
        },
        what="transformers' audio features and embeddings",
        verify=AUDIO.verifier, verify_options={"max_samples": max_samples},
    )


def export_audio_encoder(config: str, output_dir: Path, *, max_seconds: int = MAX_SECONDS,
                         quantization: str = "fp32", seed: int = 0,
                         progress: bool = True) -> EncoderExportResult:
    """Export, lower and verify the audio path of the random multimodal ``config`` into
    ``output_dir`` (``<stem>.pte`` and ``<stem>.report.json``). Raises ``ExportError`` on bad
    options and ``VerificationError`` when the program disagrees with transformers (nothing is
    written then)."""
    traced = trace_audio_encoder(config, max_seconds=max_seconds, quantization=quantization,
                                 seed=seed)
    return finish_encoder_export(traced, output_dir, progress=progress)


AUDIO = Encoder(AUDIO_CODE, _verify, max_samples_for, audio_stem, trace_audio_encoder)


def cached_audio_encoder(config: str, *, max_seconds: int = MAX_SECONDS,
                         **request: Unpack[CacheRequest]) -> EncoderExportResult:
    """``export_audio_encoder`` through ``cached_encoder``."""
    return cached_encoder(AUDIO, config, {"max_seconds": max_seconds}, **request)

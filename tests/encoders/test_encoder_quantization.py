"""Quantized encoders (``tools/export_encoder.py --quantization``): the text exporter's torchao
path over the encoders' linears, and a verification that holds a quantized program to the eager
encoder with the same quantized weights.

On the tiny random multimodal Gemma 4 (2-layer, 32-wide towers). The 8w programs agree with their
quantized eager encoders within fp32 rounding; their agreement with transformers' fp32 eager
model is what the report adds (``fp32_agreement``). Scaling one of the quantized eager encoder's
linears by 1.01 fails the verification (checked below), so the gate sees a percent-level change.
The exports are cached (~/.cache/rne/encoders); cold, each takes one to three minutes here.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from rne_tools.encoders import audio_export
from rne_tools.encoders import export as vision_export
from rne_tools.encoders.export import (
    PARITY_BOUNDS,
    BiasAfterLinear,
    EncoderExportResult,
    cached_vision_encoder,
    quantize_encoder,
)
from rne_tools.encoders.gemma4_audio import AudioEncoder
from rne_tools.encoders.gemma4_audio import for_xnnpack as audio_for_xnnpack
from rne_tools.encoders.gemma4_reference import reference_model
from rne_tools.encoders.gemma4_vision import VisionEncoder, for_xnnpack
from rne_tools.errors import ExportError

MAX_SOFT_TOKENS = 280


@pytest.fixture(scope="session")
def hf_model() -> torch.nn.Module:
    return reference_model("tiny")


@pytest.fixture(scope="session")
def vision_8w() -> EncoderExportResult:
    return cached_vision_encoder("tiny", max_soft_tokens=MAX_SOFT_TOKENS, quantization="8w",
                                 progress=False)


@pytest.fixture(scope="session")
def audio_8w() -> EncoderExportResult:
    return audio_export.cached_audio_encoder("tiny", quantization="8w", progress=False)


def _quantized_vision(model: torch.nn.Module, quantization: str) -> torch.nn.Module:
    encoder = for_xnnpack(VisionEncoder(model).eval())
    quantize_encoder(encoder, quantization, keep_float=("tower.patch_embedder",))
    return encoder


def test_unknown_quantization_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="8da4w"):
        cached_vision_encoder("tiny", quantization="int3")
    with pytest.raises(ExportError, match="use one of"):
        audio_export.export_audio_encoder("tiny", tmp_path, quantization="q4")
    assert not any(tmp_path.iterdir())


def test_quantize_encoder_keeps_named_parts_float(hf_model: torch.nn.Module) -> None:
    encoder = _quantized_vision(hf_model, "8da4w")
    linears = {n: m for n, m in encoder.named_modules() if isinstance(m, torch.nn.Linear)}
    float_ones = [n for n, m in linears.items() if type(m.weight) is torch.nn.Parameter]
    assert float_ones == ["tower.patch_embedder.input_proj"], float_ones
    # Every other linear holds a torchao quantized weight.
    assert len(linears) > 1 and all(
        type(m.weight) is not torch.nn.Parameter for n, m in linears.items()
        if n not in float_ones)


@pytest.mark.parametrize("which", ["vision", "audio"])
def test_quantized_report(which: str, vision_8w: EncoderExportResult,
                          audio_8w: EncoderExportResult) -> None:
    result = vision_8w if which == "vision" else audio_8w
    report = result.report
    assert report["quantization"] == "8w"
    assert "_xnnpack_8w_" in result.pte_path.name
    v = report["verification"]
    assert v["passed"] and v["status"] == "match"
    assert v["relative"] <= PARITY_BOUNDS["8w"]
    agreement = v["fp32_agreement"]
    # Rounding the weights to int8 moves the rows away from fp32, and the report says by how
    # much: more than the program differs from its own eager encoder, less than a broken one.
    assert v["relative"] < agreement["relative"] < 0.5, (v["relative"], agreement)
    assert 0.99 < agreement["min_cosine"] < 1.0
    for probe in v["probes"]:
        assert probe["fp32_agreement"]["relative"] <= agreement["relative"]


def test_verification_fails_on_a_scaled_linear(hf_model: torch.nn.Module,
                                               vision_8w: EncoderExportResult) -> None:
    """The injected bug: the quantized eager encoder's projection scaled by 1.01."""
    reference = _quantized_vision(hf_model, "8w")
    ok = vision_export._verify(vision_8w.pte_path, hf_model, MAX_SOFT_TOKENS, "8w", reference)
    assert ok["passed"], ok["relative"]
    broken = copy.deepcopy(reference)
    projection = broken.embed.embedding_projection
    forward = projection.forward
    projection.forward = lambda x: 1.01 * forward(x)  # type: ignore[method-assign]
    failed = vision_export._verify(vision_8w.pte_path, hf_model, MAX_SOFT_TOKENS, "8w", broken)
    assert not failed["passed"]
    assert failed["relative"] > 3 * PARITY_BOUNDS["8w"]


def test_quantized_audio_is_held_to_its_quantized_eager_encoder(
        hf_model: torch.nn.Module, audio_8w: EncoderExportResult) -> None:
    """Every audio linear is quantized (the biased ones split into a linear and an add), and the
    gate compares with the quantized eager encoder, not transformers' fp32."""
    encoder = audio_for_xnnpack(AudioEncoder(hf_model).eval())
    assert quantize_encoder(encoder, "8w") == []
    biased = [n for n, m in encoder.named_modules()
              if isinstance(m, torch.nn.Linear) and m.bias is not None]
    assert biased == [] and any(isinstance(m, BiasAfterLinear) for m in encoder.modules())
    v = audio_8w.report["verification"]
    assert v["bound"].startswith("features max |diff|")
    assert "the quantized eager encoder" in v["bound"]

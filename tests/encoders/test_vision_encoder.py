"""Gemma 4's vision encoder, exported (rne_tools.encoders) and run by the C++ runner
(VisionEncoder, through the host CLI rne_vision), against transformers' own image features.

The reference is transformers' path for a random tiny multimodal Gemma 4 (the project's tiny text
model with a 2-layer vision tower): the PIL image processor, then
``Gemma4Model.get_image_features`` (vision tower, pooling, standardisation, ``embed_vision``),
the embeddings ``Gemma4Model.forward`` scatters into the image-token positions.

Bound: fp32 XNNPACK against fp32 eager, ``PARITY_BOUND`` (1e-3) times the standard deviation of
the reference embeddings (about 0.93 here: the projection's output is the scale the decoder
sees), the text variants' bound relative to their logits' std. Measured: under 1.3e-5 of the std on
every picture, the size of fp32 rounding (fp32 eager against fp64 eager: 7.5e-6); the tanh GELU
that XNNPACK replaced by the erf one (fixed in ``for_xnnpack``) was 7.6e-4 of it, and a
transposed RoPE rotation or a skipped standardisation is order 1.

The pictures are PNGs, whose preprocessing in C++ equals transformers' bit for bit
(tests/encoders/test_image_preprocess.py), so any difference is the encoder's. The export is cached
(~/.cache/rne/encoders); cold it takes about 2 minutes here. The binary is the canonical host
build's (build/host); RNE_VISION names another (an engineer's own build directory).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from rne_tools.encoders import export
from rne_tools.encoders.export import (
    PARITY_BOUND,
    VisionExportResult,
    cached_vision_encoder,
    preprocess,
    probe_picture,
)
from rne_tools.encoders.gemma4_reference import reference_model
from rne_tools.encoders.gemma4_vision import (
    VisionEncoder,
    for_xnnpack,
    reference_image_embeddings,
)
from rne_tools.export.fingerprint import code_fingerprint

MAX_SOFT_TOKENS = 280


@pytest.fixture(scope="session")
def encoder() -> VisionExportResult:
    return cached_vision_encoder("tiny", max_soft_tokens=MAX_SOFT_TOKENS, progress=False)


@pytest.fixture(scope="session")
def hf_model() -> torch.nn.Module:
    return reference_model("tiny")


def _rgb(height: int, width: int, seed: int) -> Image.Image:
    return Image.fromarray(probe_picture(height, width, seed), "RGB")


# name -> picture: a 4:3 photo-like size, grey, RGBA (composited onto white by both), a 2-pixel
# line (one row of soft tokens, half the rows padding) and a tiny picture scaled up.
PICTURES: dict[str, Callable[[], Image.Image]] = {
    "rgb_4x3": lambda: _rgb(300, 400, 1),
    "grey_square": lambda: _rgb(200, 200, 2).convert("L"),
    "rgba": lambda: Image.fromarray(
        np.dstack([probe_picture(90, 160, 3),
                   np.random.default_rng(3).integers(0, 256, (90, 160, 1), dtype=np.uint8)]),
        "RGBA"),
    "line": lambda: _rgb(2, 150, 4),
    "tiny": lambda: _rgb(9, 13, 5),
}


def run_ours(binary: Path, model: Path, image: Path, out: Path) -> tuple[dict, np.ndarray]:
    done = subprocess.run([binary, model, image, out], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads(done.stdout)
    values = np.fromfile(out, np.float32).reshape(meta["num_soft_tokens"], meta["hidden"])
    return meta, values


def test_export_report_carries_parity(encoder: VisionExportResult) -> None:
    report = encoder.report
    v = report["verification"]
    assert v["passed"] and v["status"] == "match"
    assert report["method"] == "vision_encoder" and report["backend"] == "xnnpack"
    assert report["max_patches"] == MAX_SOFT_TOKENS * 9 and report["patch_dim"] == 768
    for probe in v["probes"]:
        assert probe["max_abs_diff"] <= PARITY_BOUND * probe["reference_std"], probe
        assert probe["max_abs_padding"] == 0.0, probe
    # The bound is relative to a signal of real size (not a collapsed, near-zero output).
    assert min(p["reference_std"] for p in v["probes"]) > 0.5
    assert encoder.pte_path.stat().st_size == report["size"]


def test_xnnpack_rewrite_computes_transformers_function(hf_model: torch.nn.Module) -> None:
    """The rewritten encoder (what is exported) equals transformers' eager path in eager mode,
    so the program's parity is the lowering's alone."""
    pixels, positions, count = preprocess(probe_picture(120, 90, 7), MAX_SOFT_TOKENS)
    reference = reference_image_embeddings(hf_model, pixels, positions)
    with torch.no_grad():
        plain = VisionEncoder(hf_model).eval()(pixels, positions)
        rewritten = for_xnnpack(VisionEncoder(hf_model).eval())(pixels, positions)
    assert reference.shape[0] == count
    torch.testing.assert_close(plain[:count], reference, rtol=0, atol=0)
    assert not plain[count:].any()
    diff = float((rewritten[:count] - reference).abs().max())
    assert diff <= 1e-5 * float(reference.std()), diff


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_runner_matches_transformers(name: str, rne_vision: Path, encoder: VisionExportResult,
                                     hf_model: torch.nn.Module, tmp_path: Path) -> None:
    picture = PICTURES[name]()
    path = tmp_path / f"{name}.png"
    picture.save(path)
    meta, ours = run_ours(rne_vision, encoder.pte_path, path, tmp_path / f"{name}.f32")

    # transformers' own processor on the same file, then its own image features.
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    processed = Gemma4ImageProcessorPil(max_soft_tokens=MAX_SOFT_TOKENS)(
        Image.open(path), return_tensors="pt")
    reference = reference_image_embeddings(
        hf_model, processed["pixel_values"], processed["image_position_ids"]).numpy()

    assert meta["num_soft_tokens"] == int(processed["num_soft_tokens_per_image"][0])
    assert ours.shape == reference.shape
    scale = float(reference.std())
    diff = float(np.abs(ours - reference).max())
    assert diff <= PARITY_BOUND * scale, f"{name}: max |diff| {diff:.3g}, reference std {scale:.3g}"


def test_bad_inputs_are_typed_errors(rne_vision: Path, encoder: VisionExportResult,
                                     tmp_path: Path) -> None:
    picture = tmp_path / "p.png"
    _rgb(30, 40, 6).save(picture)
    out = tmp_path / "out.f32"

    def fails(*args: Path) -> str:
        done = subprocess.run([rne_vision, *args], capture_output=True, text=True)
        assert done.returncode == 2, (done.returncode, done.stderr)
        return done.stderr.strip().splitlines()[-1]

    # A picture given as the encoder, a missing encoder, an image that is not one.
    assert "not an ExecuTorch program" in fails(picture, picture, out)
    assert fails(tmp_path / "absent.pte", picture, out).startswith("error: not_found")
    text = tmp_path / "notes.txt"
    text.write_text("not a picture")
    assert fails(encoder.pte_path, text, out).startswith("error: invalid_argument")
    # A truncated program: refused while loading, never run.
    truncated = tmp_path / "cut.pte"
    truncated.write_bytes(encoder.pte_path.read_bytes()[:4096])
    assert fails(truncated, picture, out).startswith("error: invalid_model")


def test_the_cache_reuses_a_program_and_re_verifies_on_new_checks(
        encoder: VisionExportResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoder cache keys a program by what determines it (``encoder_program_key``): a
    request whose recipe is new (as after a refactor) traces, finds the same program and
    lowers nothing; new verification code verifies that program again."""
    key = encoder.report["program_key"]
    assert encoder.pte_path.parent.name == key
    shutil.copytree(encoder.pte_path.parent, tmp_path / "encoders" / key)

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(export, "finish_encoder_export", no_export)
    reused = cached_vision_encoder("tiny", max_soft_tokens=MAX_SOFT_TOKENS, cache_dir=tmp_path,
                                   progress=False)
    assert reused.pte_path == tmp_path / "encoders" / key / encoder.pte_path.name
    recipes = list((tmp_path / "encoders" / "recipes").glob("gemma4_*"))
    assert [r.read_text().strip() for r in recipes] == [key]

    calls = []

    def verify(pte: Path, **options):  # new verification code, the same verdict
        calls.append(pte)
        return export._verify(pte, **options)

    monkeypatch.setattr(export, "VISION", dataclasses.replace(export.VISION, verifier=verify))
    checks = code_fingerprint(verify)  # before the call: it reads ``calls``
    checked = cached_vision_encoder("tiny", max_soft_tokens=MAX_SOFT_TOKENS, cache_dir=tmp_path,
                                    progress=False)
    assert calls == [reused.pte_path]
    assert checked.report["check_fingerprint"] == checks
    assert checked.report["check_fingerprint"] != encoder.report["check_fingerprint"]
    assert checked.report["verification"]["passed"]
    assert json.loads(reused.report_path.read_text()) == checked.report

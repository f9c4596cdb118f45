"""The runner's image preprocessing (cpp/media, through its CLI rne_image) against transformers'
Gemma 4 image processor (Gemma4ImageProcessorPil, the one transformers picks without
torchvision) on the same files: pixel_values, image_position_ids and the soft-token count.

- PNG (RGB, grey, grey+alpha, RGBA, palette, palette with tRNS, 16-bit RGB), tiny, very wide,
  very tall and large, every max_soft_tokens: the C++ resize is Pillow's fixed-point bicubic and
  the alpha composite Pillow's integer one, so the tensors are equal, bit for bit.
- JPEG (4:4:4, 4:2:2, 4:2:0, progressive, odd sizes, grey, CMYK): stb_image and PIL's
  libjpeg-turbo round the IDCT, the colour conversion and the chroma upsampling differently, so
  decoded pixels differ by a few levels. Feeding our decoded pixels to the HF processor gives our
  tensor exactly (the difference is the decoder's alone); against HF's own decode the bound is
  JPEG_MAX_LEVELS / JPEG_MEAN_LEVELS (of 255). Measured on these noisy synthetic pictures: max
  4 levels, mean under 0.25 levels; 5 levels is 2% of the [0, 1] range on the worst single value.
- The resize rule alone on thousands of sizes (edge cases of the thin-image branch included),
  and bad input: typed errors that say what is wrong.

The binary is the canonical host build's (build/host); RNE_IMAGE names another (an engineer's
own build directory).
"""

from __future__ import annotations

import json
import os
import random
import re
import struct
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from transformers.models.gemma4.image_processing_pil_gemma4 import (
    Gemma4ImageProcessorPil,
    get_aspect_ratio_preserving_size,
)

from rne_tools.encoders.export import probe_picture

JPEG_MAX_LEVELS = 5
JPEG_MEAN_LEVELS = 0.3
SOFT_TOKENS = (70, 140, 280, 560, 1120)


@pytest.fixture(scope="session")
def rne_image() -> Path:
    override = os.environ.get("RNE_IMAGE")
    if override:
        return Path(override)
    from conftest import _host_binary

    return _host_binary("rne_image")


@dataclass
class Ours:
    meta: dict
    pixel_values: np.ndarray
    position_ids: np.ndarray
    decoded: np.ndarray


def run_ours(binary: Path, image: Path, tmp: Path, max_soft_tokens: int = 280) -> Ours:
    prefix = tmp / f"{image.stem}-{max_soft_tokens}"
    done = subprocess.run([binary, "--max-soft-tokens", str(max_soft_tokens), "--dump-rgb",
                           image, prefix], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    meta = json.loads(done.stdout)
    rows, dim = meta["max_patches"], meta["patch_dim"]
    return Ours(
        meta,
        np.fromfile(f"{prefix}.pixels.f32", np.float32).reshape(rows, dim),
        np.fromfile(f"{prefix}.positions.i64", np.int64).reshape(rows, 2),
        np.fromfile(f"{prefix}.rgb.u8", np.uint8).reshape(*meta["decoded"], 3),
    )


def reference(image: Image.Image | np.ndarray, max_soft_tokens: int = 280):
    processor = Gemma4ImageProcessorPil(max_soft_tokens=max_soft_tokens)
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image, "RGB")
    out = processor(image, return_tensors="np")
    return (out["pixel_values"][0], out["image_position_ids"][0],
            int(out["num_soft_tokens_per_image"][0]))


def assert_same_layout(ours: Ours, ref_positions: np.ndarray, ref_tokens: int,
                       ref_pixels: np.ndarray) -> None:
    assert ours.pixel_values.shape == ref_pixels.shape
    assert ours.meta["num_soft_tokens"] == ref_tokens
    np.testing.assert_array_equal(ours.position_ids, ref_positions)
    # Padding rows are zero in both (a wrong patch count would show here first).
    assert not ours.pixel_values[ours.meta["num_patches"]:].any()


# --- test pictures: the encoder export's probe pictures (smooth gradients with a share of
# per-pixel noise: hard on resampling and on JPEG chroma), saved with PIL in the test's temporary
# directory.

def _alpha(height: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + 1).integers(0, 256, (height, width, 1), dtype=np.uint8)


def _png16(path: Path, samples: np.ndarray) -> None:
    """A 16-bit PNG (PIL writes 16-bit grey only): colour type 0 or 2, filter 0 on each row."""
    height, width = samples.shape[:2]
    colour = 2 if samples.ndim == 3 else 0
    raw = b"".join(b"\0" + row.astype(">u2").tobytes() for row in samples)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 16, colour, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _palette(height: int, width: int, seed: int, transparent: bool) -> Image.Image:
    image = Image.fromarray(probe_picture(height, width, seed)).convert(
        "P", palette=Image.Palette.ADAPTIVE)
    if transparent:
        image.info["transparency"] = 3
    return image


def _save(image: Image.Image, **options) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        image.save(path, **options)
        return path
    return make


PNG_CASES: dict[str, Callable[[], Image.Image]] = {
    "rgb_1x1": lambda: Image.fromarray(probe_picture(1, 1, 0)),
    "rgb_7x5": lambda: Image.fromarray(probe_picture(7, 5, 1)),
    "rgb_480x640": lambda: Image.fromarray(probe_picture(480, 640, 2)),
    "rgb_640x480": lambda: Image.fromarray(probe_picture(640, 480, 3)),
    "rgb_768x768_no_resize": lambda: Image.fromarray(probe_picture(768, 768, 4)),
    "rgb_1500x2000": lambda: Image.fromarray(probe_picture(1500, 2000, 5)),
    "wide_16x3000": lambda: Image.fromarray(probe_picture(16, 3000, 6)),
    "tall_3000x16": lambda: Image.fromarray(probe_picture(3000, 16, 7)),
    "wide_1x5000_capped": lambda: Image.fromarray(probe_picture(1, 5000, 8)),
    "wide_40x100": lambda: Image.fromarray(probe_picture(40, 100, 9)),
    "rgba": lambda: Image.fromarray(np.concatenate([probe_picture(300, 200, 10),
                                                    _alpha(300, 200, 10)], -1), "RGBA"),
    "grey": lambda: Image.fromarray(probe_picture(301, 199, 11)[..., 0]),
    "grey_alpha": lambda: Image.fromarray(np.concatenate([probe_picture(120, 90, 12)[..., :1],
                                                          _alpha(120, 90, 12)], -1), "LA"),
    "bilevel_1bit": lambda: Image.fromarray(probe_picture(77, 101, 15)[..., 0] > 127),
    "palette_4bit": lambda: Image.fromarray(probe_picture(64, 96, 16)).quantize(colors=16),
    "palette": lambda: _palette(250, 170, 13, transparent=False),
    "palette_trns": lambda: _palette(250, 170, 14, transparent=True),
}


@pytest.mark.parametrize("name", sorted(PNG_CASES))
def test_png_matches_the_processor_exactly(rne_image, tmp_path, name):
    image = PNG_CASES[name]()
    path = tmp_path / f"{name}.png"
    image.save(path)
    ours = run_ours(rne_image, path, tmp_path)
    ref_pixels, ref_positions, ref_tokens = reference(Image.open(path))
    assert_same_layout(ours, ref_positions, ref_tokens, ref_pixels)
    np.testing.assert_array_equal(ours.pixel_values, ref_pixels)


def test_16bit_rgb_png_keeps_the_high_byte_as_pil_does(rne_image, tmp_path):
    samples = np.random.default_rng(20).integers(0, 65536, (90, 130, 3)).astype(np.uint16)
    path = tmp_path / "rgb16.png"
    _png16(path, samples)
    ours = run_ours(rne_image, path, tmp_path)
    np.testing.assert_array_equal(ours.decoded, (samples >> 8).astype(np.uint8))
    ref_pixels, ref_positions, ref_tokens = reference(Image.open(path))
    assert_same_layout(ours, ref_positions, ref_tokens, ref_pixels)
    np.testing.assert_array_equal(ours.pixel_values, ref_pixels)


def test_16bit_grey_png_keeps_the_high_byte(rne_image, tmp_path):
    """Documented deviation: PIL converts 16-bit grey ("I;16") to RGB by clipping each value at
    255 (a picture turns almost white); the runner keeps the high byte, the picture's content."""
    samples = np.random.default_rng(21).integers(0, 65536, (64, 48)).astype(np.uint16)
    path = tmp_path / "grey16.png"
    _png16(path, samples)
    ours = run_ours(rne_image, path, tmp_path)
    np.testing.assert_array_equal(ours.decoded, np.repeat((samples >> 8).astype(np.uint8)[..., None],
                                                          3, axis=-1))
    pil = np.array(Image.open(path).convert("RGB"))
    assert (pil == 255).mean() > 0.99  # what the processor would see instead


@pytest.mark.parametrize("max_soft_tokens", SOFT_TOKENS)
def test_every_soft_token_budget(rne_image, tmp_path, max_soft_tokens):
    path = tmp_path / "budget.png"
    Image.fromarray(probe_picture(517, 333, 30)).save(path)
    ours = run_ours(rne_image, path, tmp_path, max_soft_tokens)
    ref_pixels, ref_positions, ref_tokens = reference(Image.open(path), max_soft_tokens)
    assert_same_layout(ours, ref_positions, ref_tokens, ref_pixels)
    assert ours.meta["max_patches"] == max_soft_tokens * 9
    np.testing.assert_array_equal(ours.pixel_values, ref_pixels)


JPEG_CASES: dict[str, Callable[[], tuple[Image.Image, dict]]] = {
    "ycc444_q90": lambda: (Image.fromarray(probe_picture(480, 640, 40)), {"quality": 90, "subsampling": 0}),
    "ycc422_q90": lambda: (Image.fromarray(probe_picture(480, 640, 41)), {"quality": 90, "subsampling": 1}),
    "ycc420_q90": lambda: (Image.fromarray(probe_picture(480, 640, 42)), {"quality": 90, "subsampling": 2}),
    "ycc420_odd_q75": lambda: (Image.fromarray(probe_picture(333, 517, 43)), {"quality": 75, "subsampling": 2}),
    "ycc422_odd_q95": lambda: (Image.fromarray(probe_picture(201, 299, 44)), {"quality": 95, "subsampling": 1}),
    "progressive": lambda: (Image.fromarray(probe_picture(333, 517, 45)), {"quality": 80, "progressive": True}),
    "large_2000x1500": lambda: (Image.fromarray(probe_picture(2000, 1500, 46)), {"quality": 85}),
    # A subsampled side of 1-2 pixels is the one place the decoders part further (libjpeg
    # interpolates the edge against the block's padding): tiny pictures stay 4:4:4 below 3 px.
    "tiny_3x2_444": lambda: (Image.fromarray(probe_picture(3, 2, 47)), {"quality": 90, "subsampling": 0}),
    "tiny_5x7_420": lambda: (Image.fromarray(probe_picture(5, 7, 47)), {"quality": 90, "subsampling": 2}),
    "grey": lambda: (Image.fromarray(probe_picture(300, 200, 48)[..., 0]), {"quality": 90}),
    "cmyk": lambda: (Image.fromarray(probe_picture(200, 300, 49)).convert("CMYK"), {"quality": 95}),
}


@pytest.mark.parametrize("name", sorted(JPEG_CASES))
def test_jpeg_matches_the_processor_within_the_decoder_bound(rne_image, tmp_path, name):
    image, options = JPEG_CASES[name]()
    path = tmp_path / f"{name}.jpg"
    image.save(path, **options)
    ours = run_ours(rne_image, path, tmp_path)
    ref_pixels, ref_positions, ref_tokens = reference(Image.open(path))
    assert_same_layout(ours, ref_positions, ref_tokens, ref_pixels)
    # Resize and patchify are exact: from our decoded pixels the processor gives our tensor.
    np.testing.assert_array_equal(ours.pixel_values, reference(ours.decoded)[0])
    levels = np.abs(ours.pixel_values.astype(np.float64) - ref_pixels) * 255
    print(f"{name}: max {levels.max():.2f}/255, mean {levels.mean():.4f}/255")
    assert levels.max() <= JPEG_MAX_LEVELS
    assert levels.mean() <= JPEG_MEAN_LEVELS


def test_resize_rule_on_many_sizes(rne_image):
    rng = random.Random(0)
    sizes = [(h, w) for h in (1, 2, 15, 16, 47, 48, 49, 767, 768, 769) for w in (1, 3, 48, 999)]
    sizes += [(1, 65535), (65535, 1), (65535, 65535), (1, 16_000_000), (16_000_000, 1)]
    sizes += [(rng.randint(1, 8000), rng.randint(1, 8000)) for _ in range(1500)]
    sizes += [(rng.randint(1, 40), rng.randint(1, 100_000)) for _ in range(300)]
    sizes += [(w, h) for h, w in sizes[-300:]]
    stdin = "".join(f"{h} {w}\n" for h, w in sizes)
    for max_soft_tokens in SOFT_TOKENS:
        done = subprocess.run([rne_image, "--max-soft-tokens", str(max_soft_tokens),
                               "--target-sizes"], input=stdin, capture_output=True, text=True,
                              check=True)
        lines = done.stdout.splitlines()
        assert len(lines) == len(sizes)
        for (h, w), line in zip(sizes, lines, strict=True):
            try:
                th, tw = get_aspect_ratio_preserving_size(h, w, 16, max_soft_tokens * 9, 3)
            except ValueError:
                assert line.startswith("error:"), (h, w, line)
                continue
            assert line == f"{th} {tw} {(th // 16) * (tw // 16) // 9}", (h, w, max_soft_tokens)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _huge_png(path: Path) -> Path:
    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
                     + _chunk(b"IDAT", zlib.compress(b"\0" * 16)) + _chunk(b"IEND", b""))
    return path


def _huge_jpeg(path: Path) -> Path:
    """A real JPEG whose frame header claims 65000 x 65000 pixels."""
    Image.fromarray(probe_picture(16, 16, 60)).save(path, format="JPEG", quality=90)
    data = bytearray(path.read_bytes())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", 65000, 65000)
    path.write_bytes(bytes(data))
    return path


def _truncated(suffix: str) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        Image.fromarray(probe_picture(120, 160, 61)).save(path.with_suffix(suffix), quality=90)
        data = path.with_suffix(suffix).read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return path
    return make


BAD_INPUTS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "empty": (lambda p: (p.write_bytes(b""), p)[1], "invalid_argument: .* is empty"),
    "text": (lambda p: (p.write_bytes(b"not an image at all"), p)[1],
             "invalid_argument: .*not a JPEG or PNG image"),
    "gif": (_save(Image.new("RGB", (8, 8)), format="GIF"), "not a JPEG or PNG image"),
    "truncated_png": (_truncated(".png"), "PNG.* the file is truncated"),
    "truncated_jpeg": (_truncated(".jpg"), "cannot decode the JPEG image .*truncated"),
    "huge_png": (_huge_png, "100000x100000 pixels, over the limit .*downscale"),
    "huge_jpeg": (_huge_jpeg, "65000x65000 pixels, over the limit .*downscale"),
    "header_only_png": (lambda p: (p.write_bytes(b"\x89PNG\r\n\x1a\n"), p)[1],
                        "cannot read the PNG header"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_a_clear_error(rne_image, tmp_path, name):
    make, pattern = BAD_INPUTS[name]
    path = make(tmp_path / f"bad_{name}")
    done = subprocess.run([rne_image, path, tmp_path / "out"], capture_output=True, text=True)
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("error: "), done.stderr
    assert re.search(pattern, done.stderr), done.stderr
    assert not (tmp_path / "out.pixels.f32").exists()


def test_missing_file_and_bad_budget(rne_image, tmp_path):
    done = subprocess.run([rne_image, tmp_path / "nope.png", tmp_path / "out"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "error: not_found: cannot open the image file" in done.stderr
    path = tmp_path / "ok.png"
    Image.fromarray(probe_picture(20, 20, 70)).save(path)
    done = subprocess.run([rne_image, "--max-soft-tokens", "100", path, tmp_path / "out"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "max_soft_tokens must be one of" in done.stderr

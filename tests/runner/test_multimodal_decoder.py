"""Images and audio in a Gemma 4 conversation, end to end, against transformers.

The model is a random tiny multimodal Gemma 4 with Gemma 4's 262,144-id vocabulary
(``rne_tools.encoders.gemma4_reference``, config ``tiny_gemma4_vocab``), saved by transformers
(``save_pretrained``) and exported from that checkpoint like a downloaded one: the decoder by
``cached_export`` (its program takes the encoders' rows as ``embeds``), the vision and audio
encoders by ``cached_vision_encoder``/``cached_audio_encoder`` (the same seeded weights). The
prompt is Gemma 4's real chat template and the Gemma-4-shaped tokenizer (``__tests__/fixtures``).

The reference is transformers' own path: its PIL image processor and audio feature extractor,
the template rendered by the tokenizer, each placeholder expanded by
``Gemma4Processor.replace_image_token``/``replace_audio_token`` (the ``Gemma4Processor`` object
itself cannot be built here without torchvision's video processor), and
``Gemma4ForConditionalGeneration`` on the resulting inputs. A conversation with a picture, one
with a clip and one with both: the runner's prompt ids, 16 greedy tokens through ``rne_llm`` and
every prompt position's logits through ``rne_logits`` (with the C++ encoders' rows).

Bound: fp32 XNNPACK, ``1e-3`` x the std of transformers' logits at every prompt position (the
text variants' bound). Measured: see docs/multimodal.md. Splicing the rows scaled by
``sqrt(hidden)`` like text embeddings, or dropping one row, fails it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import wave as wave_module
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from rne_tools.encoders.audio_export import cached_audio_encoder
from rne_tools.encoders.export import cached_vision_encoder, probe_picture
from rne_tools.encoders.gemma4_audio import feature_extractor
from rne_tools.encoders.gemma4_reference import cached_checkpoint, reference_model
from rne_tools.export import cached_export
from rne_tools.paths import REPO_ROOT

CONFIG = "tiny_gemma4_vocab"
MAX_SOFT_TOKENS = 70
MAX_SECONDS = 4
SOFT_TOKENS = {"image": 258880, "audio": 258881}
BOUND = 1e-3
QUESTION = "What is in this picture?"
NEW_TOKENS = 16
FIXTURES = REPO_ROOT / "packages" / "react-native-executorch" / "__tests__" / "fixtures"
TEMPLATE = FIXTURES / "gemma4" / "gemma4.jinja"


def _tokenizer_json() -> Path:
    sys.path.insert(0, str(FIXTURES))
    from make_gemma4_fixtures import gemma4_shaped_tokenizer_json

    return gemma4_shaped_tokenizer_json()


@pytest.fixture(scope="session")
def hf_model() -> torch.nn.Module:
    return reference_model(CONFIG)


@pytest.fixture(scope="session")
def checkpoint() -> Path:
    return cached_checkpoint(CONFIG)


@pytest.fixture(scope="session")
def decoder(checkpoint: Path) -> Path:
    result = cached_export("gemma4_e2b", "xnnpack", "fp32", checkpoint=checkpoint,
                           max_context=512, max_chunk=32, progress=False)
    return result.pte_path


@pytest.fixture(scope="session")
def encoder() -> Path:
    return cached_vision_encoder(CONFIG, max_soft_tokens=MAX_SOFT_TOKENS, progress=False).pte_path


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tokenizer.json with chat_template.jinja beside it, where rne_llm looks for the template."""
    path = tmp_path_factory.mktemp("gemma4_tokenizer")
    shutil.copy(_tokenizer_json(), path / "tokenizer.json")
    shutil.copy(TEMPLATE, path / "chat_template.jinja")
    return path


@pytest.fixture(scope="session")
def audio_encoder() -> Path:
    return cached_audio_encoder(CONFIG, max_seconds=MAX_SECONDS, progress=False).pte_path


@pytest.fixture(scope="session")
def media_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A PNG photo and a 16-bit 16 kHz mono WAV clip (a chirp under noise, 1.3 s)."""
    folder = tmp_path_factory.mktemp("media")
    picture = folder / "photo.png"
    Image.fromarray(probe_picture(300, 400, 7), "RGB").save(picture)
    t = np.arange(int(1.3 * 16000)) / 16000
    rng = np.random.default_rng(3)
    wave = 0.4 * np.sin(2 * np.pi * (200 + 300 * t) * t) + 0.05 * rng.standard_normal(t.size)
    clip = folder / "clip.wav"
    with wave_module.open(str(clip), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes((np.clip(wave, -1, 1) * 32767).astype("<i2").tobytes())
    return {"image": picture, "audio": clip}


def reference_inputs(kinds: tuple[str, ...], files: dict[str, Path]) -> dict[str, torch.Tensor]:
    """transformers' inputs for one user turn: the media in ``kinds``' order, then the question.
    The text is the template rendered by the tokenizer, each placeholder expanded by the
    processor's own ``replace_image_token``/``replace_audio_token``; pixels and features from
    its image processor and feature extractor (the WAV read as the runner reads it: int16 /
    32768)."""
    from transformers import Gemma4Processor, PreTrainedTokenizerFast
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(_tokenizer_json()))
    content = [{"type": kind} for kind in kinds] + [{"type": "text", "text": QUESTION}]
    text = tokenizer.apply_chat_template([{"role": "user", "content": content}],
                                         chat_template=TEMPLATE.read_text(),
                                         add_generation_prompt=True, tokenize=False)
    markers = SimpleNamespace(boi_token="<|image>", image_token="<|image|>", eoi_token="<image|>",
                              boa_token="<|audio>", audio_token="<|audio|>", eoa_token="<audio|>")
    inputs: dict[str, torch.Tensor] = {}
    if "image" in kinds:
        images = Gemma4ImageProcessorPil(max_soft_tokens=MAX_SOFT_TOKENS)(
            images=[Image.open(files["image"])], return_tensors="pt")
        inputs |= {"pixel_values": images["pixel_values"],
                   "image_position_ids": images["image_position_ids"]}
        text = text.replace("<|image|>", Gemma4Processor.replace_image_token(markers, images, 0), 1)
    if "audio" in kinds:
        with wave_module.open(str(files["audio"]), "rb") as clip:
            samples = np.frombuffer(clip.readframes(clip.getnframes()), "<i2") / 32768.0
        features = feature_extractor()([samples.astype(np.float32)], return_tensors="pt")
        inputs |= {"input_features": features["input_features"],
                   "input_features_mask": features["input_features_mask"]}
        audio_text = Gemma4Processor.replace_audio_token(markers, features, 0)
        text = text.replace("<|audio|>", audio_text, 1)
    inputs["input_ids"] = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    return inputs


def run_tool(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def test_export_checks_the_media_input(decoder: Path) -> None:
    report = json.loads(decoder.with_suffix(".report.json").read_text())
    media = report["verification"]["media"]
    assert media["passed"] and media["media_tokens"] > 0
    assert media["max_abs_logit_diff"] <= BOUND * media["logit_std"], media


@pytest.mark.parametrize("kinds", [("image",), ("audio",), ("image", "audio")],
                         ids=["image", "audio", "image+audio"])
def test_media_turn_matches_transformers(kinds: tuple[str, ...], hf_model: torch.nn.Module,
                                         decoder: Path, encoder: Path, audio_encoder: Path,
                                         tokenizer_dir: Path, media_files: dict[str, Path],
                                         rne_llm: Path, rne_logits_host: Path, rne_vision: Path,
                                         rne_audio: Path, tmp_path: Path) -> None:
    inputs = reference_inputs(kinds, media_files)
    ids = inputs["input_ids"][0].tolist()
    with torch.no_grad():
        expected = hf_model(**inputs).logits[0].float()
        greedy = hf_model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
    expected_tokens = greedy[0, len(ids):].tolist()

    # The runner: template, placeholder expansion, encoders, splice, prefill, greedy decode.
    flags = {"image": ["--vision-encoder", encoder, "--image", media_files["image"]],
             "audio": ["--audio-encoder", audio_encoder, "--audio", media_files["audio"]]}
    done = run_tool(rne_llm, "--model", decoder, "--tokenizer", tokenizer_dir / "tokenizer.json",
                    *[flag for kind in kinds for flag in flags[kind]], "--json", "--ignore-eos",
                    "--max-new-tokens", NEW_TOKENS, QUESTION)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["prompt_ids"] == ids
    assert out["tokens"] == expected_tokens

    # Every prompt position's logits, one position per forward, with the C++ encoders' rows.
    embeds: list[object] = []
    for kind in kinds:
        rows = tmp_path / f"{kind}.f32"
        tool, model = (rne_vision, encoder) if kind == "image" else (rne_audio, audio_encoder)
        encoded = run_tool(tool, model, media_files[kind], rows)
        assert encoded.returncode == 0, encoded.stderr
        soft = SOFT_TOKENS[kind]
        embeds += ["--embeds", rows, "--embeds-at", ids.index(soft)]
    logits = tmp_path / "logits.f32"
    done = run_tool(rne_logits_host, "--model", decoder, "--tokens", ",".join(map(str, ids)),
                    "--chunks", ",".join(["1"] * len(ids)), "--out", logits, *embeds)
    assert done.returncode == 0, done.stderr
    ours = torch.from_numpy(np.fromfile(logits, np.float32).reshape(len(ids), -1))
    diff = (ours - expected).abs().max(dim=-1).values
    std = expected.std(dim=-1)
    worst = int((diff / std).argmax())
    assert (diff <= BOUND * std).all(), (
        f"position {worst}: |diff| {diff[worst]:.3g} against std {std[worst]:.3g}")


def test_media_errors_are_clear(decoder: Path, encoder: Path, audio_encoder: Path,
                                tokenizer_dir: Path, media_files: dict[str, Path], rne_llm: Path,
                                tmp_path: Path) -> None:
    picture, clip = media_files["image"], media_files["audio"]
    base = [rne_llm, "--model", decoder, "--tokenizer", tokenizer_dir / "tokenizer.json",
            "--max-new-tokens", 1]
    not_an_image = tmp_path / "notes.png"
    not_an_image.write_text("not a picture")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(picture.read_bytes()[:200])
    slow, long = tmp_path / "8k.wav", tmp_path / "long.wav"
    for path, rate, seconds in ((slow, 8000, 1), (long, 16000, MAX_SECONDS + 1)):
        with wave_module.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(rate)
            out.writeframes(np.zeros(rate * seconds, "<i2").tobytes())
    cases = {
        "needs --vision-encoder": [*base, "--image", picture, QUESTION],
        "not a JPEG or PNG": [*base, "--vision-encoder", encoder, "--image", not_an_image,
                              QUESTION],
        "cannot decode the PNG": [*base, "--vision-encoder", encoder, "--image", truncated,
                                  QUESTION],
        "cannot open the image file": [*base, "--vision-encoder", encoder, "--image",
                                       tmp_path / "missing.png", QUESTION],
        "vision_encoder": [*base, "--vision-encoder", decoder, "--image", picture, QUESTION],
        "needs --audio-encoder": [*base, "--audio", clip, QUESTION],
        "RIFF": [*base, "--audio-encoder", audio_encoder, "--audio", picture, QUESTION],
        "8000": [*base, "--audio-encoder", audio_encoder, "--audio", slow, QUESTION],
        "over the model's": [*base, "--audio-encoder", audio_encoder, "--audio", long, QUESTION],
    }
    for expected, args in cases.items():
        done = run_tool(*args)
        assert done.returncode != 0 and expected in done.stderr, (expected, done.stderr)

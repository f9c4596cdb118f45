"""Every parser of untrusted input in the C++ core, fuzzed under AddressSanitizer and UBSan.

``cpp/fuzz`` (its own CMake project, no ExecuTorch) is built into ``build/sanitize`` with
``-fsanitize=address,undefined`` and every finding fatal, then ``rne_fuzz`` runs each target for a
fixed, seeded set of cases (with a time cap): chat templates, GBNF, JSON Schema, regex, PNG, JPEG, WAV, the ``.pte``
program check and tokenizer.json. Seeds are real inputs (pictures written by Pillow, Gemma 4's
chat template, the tiny model's ``.pte``, a tokenizer.json), and each case is a seed with a few
random edits (bit flips, boundary values, cuts, repeats, splices, dictionary tokens, nesting
thousands deep). A crash, any sanitizer report or a case over the hang limit fails the target;
the counts of every target are printed (``[fuzz] ...``) whatever happens. docs/fuzzing.md.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from rne_tools.paths import REPO_ROOT

CPP_DIR = REPO_ROOT / "packages" / "react-native-executorch" / "cpp"
BUILD_DIR = REPO_ROOT / "build" / "sanitize"
TEMPLATES = REPO_ROOT / "packages" / "react-native-executorch" / "__tests__" / "fixtures" / "gemma4"
# Cases per target: about 5 s each on this machine (2 cores shared, under the sanitizers). With
# the fixed seed every run tries the same cases; the time cap only cuts a much slower machine's.
CASES = {"template": 1500, "gbnf": 12000, "json_schema": 12000, "regex": 60, "png": 150000,
         "jpeg": 40000, "wav": 300000, "program": 1200, "tokenizer": 20000}
TARGETS = tuple(CASES)
MAX_SECONDS_PER_TARGET = 30
HANG_SECONDS = 10
COUNTS = re.compile(r"^fuzz (\w+): cases (\d+), clean errors (\d+), accepted (\d+), unclear (\d+), "
                    r"crashes (\d+), hangs (\d+)", re.MULTILINE)
RESULTS: dict[str, str] = {}


@pytest.fixture(scope="module")
def rne_fuzz() -> Path:
    """``rne_fuzz`` from build/sanitize: configured if absent, always brought up to date."""
    cmake = REPO_ROOT / ".venv" / "bin" / "cmake"
    if not (BUILD_DIR / "CMakeCache.txt").is_file():
        subprocess.run([cmake, "-S", CPP_DIR / "fuzz", "-B", BUILD_DIR, "-G", "Ninja"], check=True,
                       capture_output=True)
    built = subprocess.run([cmake, "--build", BUILD_DIR, "-j", "2", "--target", "rne_fuzz"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return BUILD_DIR / "rne_fuzz"


@pytest.fixture(scope="module", autouse=True)
def summary(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        write = reporter.write_line if reporter else print
        write("")
        for target in TARGETS:
            if target in RESULTS:
                write(f"[fuzz] {RESULTS[target]}")


def _pictures(directory: Path) -> dict[str, Path]:
    """PNGs and JPEGs of every kind the decoder takes, small so that each case decodes fast."""
    from PIL import Image

    base = Image.new("RGB", (33, 17))
    base.putdata([((x * 37) % 256, (y * 59) % 256, ((x + y) * 11) % 256)
                  for y in range(17) for x in range(33)])
    png, jpeg = directory / "png", directory / "jpeg"
    png.mkdir()
    jpeg.mkdir()
    for mode in ("RGB", "RGBA", "L", "LA", "P", "1", "I;16"):
        base.convert(mode).save(png / f"{mode.replace(';', '')}.png")
    base.convert("P").save(png / "P-tRNS.png", transparency=3)  # stb's tRNS expansion
    for name, options in {"baseline": {}, "progressive": {"progressive": True},
                          "444": {"subsampling": 0}, "422": {"subsampling": 1},
                          "restarts": {"restart_marker_blocks": 1}}.items():
        base.save(jpeg / f"{name}.jpg", quality=80, **options)
    base.convert("L").save(jpeg / "grey.jpg")
    base.convert("CMYK").save(jpeg / "cmyk.jpg")
    return {"png": png, "jpeg": jpeg}


def _clip(directory: Path) -> Path:
    out = directory / "wav"
    out.mkdir()
    with wave.open(str(out / "pcm16.wav"), "wb") as clip:
        clip.setnchannels(1)
        clip.setsampwidth(2)
        clip.setframerate(16000)
        clip.writeframes(b"".join(struct.pack("<h", (i * 997) % 30000 - 15000) for i in range(300)))
    return out


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory, tiny_llama_fp32,  # noqa: ANN001 (conftest)
          byte_tokenizer: Path) -> dict[str, list[Path]]:
    directory = tmp_path_factory.mktemp("fuzz-seeds")
    pictures = _pictures(directory)
    return {
        "png": [pictures["png"]],
        "jpeg": [pictures["jpeg"]],
        "wav": [_clip(directory)],
        "template": sorted(TEMPLATES.glob("*.jinja")),
        "program": [tiny_llama_fp32.pte_path],
        "tokenizer": [byte_tokenizer],
        "gbnf": [],
        "json_schema": [],
        "regex": [],
    }


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target_is_clean_under_sanitizers(rne_fuzz: Path, seeds: dict[str, list[Path]],
                                               target: str, tmp_path: Path) -> None:
    args: list[str | Path] = [rne_fuzz, target, "--cases", str(CASES[target]), "--seconds",
                              str(MAX_SECONDS_PER_TARGET), "--hang-seconds", str(HANG_SECONDS),
                              "--save-dir", tmp_path]
    for seed in seeds[target]:
        args += ["--seeds", seed]
    env = {**os.environ, "ASAN_OPTIONS": "abort_on_error=0:detect_leaks=1",
           "UBSAN_OPTIONS": "print_stacktrace=1"}
    done = subprocess.run(args, capture_output=True, text=True, env=env,
                          timeout=MAX_SECONDS_PER_TARGET + HANG_SECONDS + 60)
    found = COUNTS.search(done.stdout)
    RESULTS[target] = found.group(0) if found else f"{target}: ended before its counts (exit {done.returncode})"
    saved = sorted(p.name for p in tmp_path.iterdir())
    assert done.returncode == 0 and found, (
        f"rne_fuzz {target} exit {done.returncode}; input saved as {saved}:\n{done.stderr[-4000:]}")
    assert found.group(6) == found.group(7) == "0", found.group(0)
    assert int(found.group(2)) > len(seeds[target]), "the target ran no mutated case"

"""Shared fixtures: cached exports, the host CLI build and a byte-level tokenizer.

Exports are cached under ``~/.cache/rne/exports`` (``$RNE_CACHE_DIR``) keyed by the program they
produce (``rne_tools.export.cached_export``, ``docs/design.md``),
so they are made once per machine and shared by pytest sessions, the C++ runner's tests and the
demo (``tools/export_model.py ... --cached`` prints the same cached path).
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rne_tools.export import ExportResult, cached_export
from rne_tools.paths import CACHE_DIR, PACKAGE_DIR, REGISTRY_DIR, REPO_ROOT

# Tiny random Llama: chunk 16 over a 64-token cache.
TINY = dict(random_config="tiny", max_context=64, max_chunk=16)


@pytest.fixture(scope="session")
def tiny_llama_fp32() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "fp32", progress=False, **TINY)


@pytest.fixture(scope="session")
def tiny_llama_8w() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "8w", progress=False, **TINY)


@pytest.fixture(scope="session")
def tiny_llama_8da4w() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "8da4w", progress=False, **TINY)


@pytest.fixture(scope="session")
def tiny_llama_8da4w_emb4() -> ExportResult:
    return cached_export(
        "smollm2_135m", "xnnpack", "8da4w", embedding_quantization="4w", progress=False, **TINY
    )


@pytest.fixture(scope="session")
def smollm2_checkpoint() -> Path:
    from rne_tools.gguf_import import default_checkpoint

    return default_checkpoint("smollm2_135m")


# The real SmolLM2 with the registry's xnnpack variant shape (context 2048, chunk 64).
@pytest.fixture(scope="session")
def smollm2_fp32() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "fp32", progress=False)


# The suite's SmolLM2 8da4w carries the speculative `verify` method (chunks of up to 8): one
# export serves the plain and the speculative tests, since lowering it costs minutes cold.
SMOLLM2_8DA4W = dict(verify_tokens=8)


@pytest.fixture(scope="session")
def smollm2_8da4w() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "8da4w", progress=False, **SMOLLM2_8DA4W)


@pytest.fixture(scope="session")
def smollm2_8w() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "8w", progress=False)


# Tests marked `executorch_source` need the locked ExecuTorch source in the cache (and the
# execution tests its build, build/linux). Where it is absent they are not collected, and one
# line says which did not run and how to get the source: they never count as passed.
def _executorch_source():
    from rne_tools.binaries.lock import load_lock
    from rne_tools.binaries.source_cache import SourceLayout
    from rne_tools.paths import cache_root

    return SourceLayout(cache_root(), load_lock())


def pytest_collection_modifyitems(config, items):
    layout = _executorch_source()
    if layout.is_complete():
        return
    absent = [i for i in items if i.get_closest_marker("executorch_source")]
    if absent:
        items[:] = [i for i in items if not i.get_closest_marker("executorch_source")]
        config.hook.pytest_deselected(items=absent)
        config._rne_not_run = (f"NOT RUN: {len(absent)} ExecuTorch-source test(s) "
                               f"({', '.join(sorted({i.module.__name__ for i in absent}))}): "
                               + layout.missing_message())


def pytest_terminal_summary(terminalreporter, config):
    line = getattr(config, "_rne_not_run", None)
    if line:
        terminalreporter.write_line(line, yellow=True)
    _save_durations(terminalreporter)


# Every test's time (setup + call + teardown), slowest first, kept under build/ so the slow tests
# of the last run are visible without re-running anything.
DURATIONS_FILE = REPO_ROOT / "build" / "pytest-durations.tsv"


def _save_durations(terminalreporter) -> None:
    totals: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if hasattr(report, "duration") and getattr(report, "nodeid", ""):
                totals[report.nodeid] = totals.get(report.nodeid, 0.0) + report.duration
    if not totals:
        return
    DURATIONS_FILE.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(totals.items(), key=lambda item: -item[1])
    DURATIONS_FILE.write_text("seconds\ttest\n" + "".join(f"{t:.2f}\t{n}\n" for n, t in rows))
    terminalreporter.write_line(f"test durations, slowest first: {DURATIONS_FILE}")


@pytest.fixture(scope="session")
def executorch_source_dir() -> Path:
    return _executorch_source().executorch


# The C++ host CLI and a tokenizer for the tiny models (tests/runner/test_cpp_runner.py,
# tests/faults/test_faults_inputs.py).
BUILD_DIR = REPO_ROOT / "build" / "host"


def _host_binary(target: str) -> Path:
    """``target`` from the canonical host build: configured if absent, always brought up to
    date (a no-op when nothing changed) so a stale binary is never tested."""
    cmake = REPO_ROOT / ".venv" / "bin" / "cmake"
    if not (BUILD_DIR / "CMakeCache.txt").is_file():
        subprocess.run([cmake, "-S", PACKAGE_DIR / "cpp", "-B", BUILD_DIR, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    subprocess.run([cmake, "--build", BUILD_DIR, "-j", "2", "--target", target],
                   check=True, capture_output=True)
    return BUILD_DIR / "host" / target


@pytest.fixture(scope="session")
def rne_llm() -> Path:
    return _host_binary("rne_llm")


@pytest.fixture(scope="session")
def rne_bench() -> Path:
    return _host_binary("rne_bench")


@pytest.fixture(scope="session")
def rne_logits_host() -> Path:
    """The host build's rne_logits (the wheel's runtime and the host LLM custom ops)."""
    return _host_binary("rne_logits")


@pytest.fixture(scope="session")
def rne_vision() -> Path:
    """The host rne_vision, or RNE_VISION (an engineer's own build)."""
    override = os.environ.get("RNE_VISION")
    return Path(override) if override else _host_binary("rne_vision")


@pytest.fixture(scope="session")
def rne_audio() -> Path:
    """The host rne_audio, or RNE_AUDIO (an engineer's own build)."""
    override = os.environ.get("RNE_AUDIO")
    return Path(override) if override else _host_binary("rne_audio")


@pytest.fixture(scope="session")
def byte_tokenizer() -> Path:
    """A byte-level tokenizer.json with exactly 256 tokens, for the tiny random models (their
    vocabulary is 256): the runner refuses a tokenizer larger than the model's vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    path = CACHE_DIR / "tokenizers" / "bytes256" / "tokenizer.json"
    if not path.is_file():
        alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
        tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.decoder = decoders.ByteLevel()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tok.save(str(tmp))
        tmp.replace(path)
    return path


@pytest.fixture
def registry_copy(tmp_path: Path) -> Path:
    """A writable copy of the real registry (the registry tests edit it with tests/registry_edits.py).
    Not called ``reg_dir``: a conftest fixture would override the publish suites' own ``reg_dir``
    (a plugin's, publish_fixtures), which also prepares exports."""
    target = tmp_path / "model-registry"
    shutil.copytree(REGISTRY_DIR, target)
    return target

"""Shared, cached export fixtures.

Exports are cached under ``.cache/exports`` keyed by their inputs (``rne_tools.export.cached_export``),
so they are made once per machine and shared by pytest sessions, the C++ runner's tests and the
demo (``tools/export_model.py ... --cached`` prints the same cached path).
"""

from pathlib import Path

import pytest

from rne_tools.export import ExportResult, cached_export

# Tiny random Llama: chunk 16 over a 64-token cache.
TINY = dict(random_config="tiny", max_context=64, max_chunk=16)


@pytest.fixture(scope="session")
def tiny_llama_fp32() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "fp32", progress=False, **TINY)


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
    from rne_tools.gguf_import import smollm2_checkpoint as import_smollm2

    return import_smollm2()


# The real SmolLM2 with the registry's xnnpack variant shape (context 2048, chunk 64).
@pytest.fixture(scope="session")
def smollm2_fp32() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "fp32", progress=False)


@pytest.fixture(scope="session")
def smollm2_8da4w() -> ExportResult:
    return cached_export("smollm2_135m", "xnnpack", "8da4w", progress=False)


# Tests marked `executorch_source` need the locked ExecuTorch source in the cache (and the
# execution tests its build, build/linux). Where it is absent they are not collected, and one
# line says which did not run and how to get the source: they never count as passed.
def _executorch_source():
    from rne_tools.binaries.lock import load_lock
    from rne_tools.binaries.source_cache import SourceLayout, cache_root

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


@pytest.fixture(scope="session")
def executorch_source_dir() -> Path:
    return _executorch_source().executorch

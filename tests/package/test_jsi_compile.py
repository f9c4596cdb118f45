"""Host compile check of the React Native JSI binding (packages/react-native-executorch/cpp/jsi)
and the seam core it wraps (cpp/seam).

No JS engine with JSI exists on this machine (Hermes ships only inside the iOS/Android builds),
so the binding is compiled, not run: against the JSI and CallInvoker headers of the installed
`react-native` package and the runner's public headers, with warnings as errors. A second test
keeps the binding's method list and the TypeScript seam (src/native/seam.ts) in step.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rne_tools.paths import PACKAGE_DIR, REPO_ROOT

JSI_DIR = PACKAGE_DIR / "cpp" / "jsi"
SEAM_DIR = PACKAGE_DIR / "cpp" / "seam"
REACT_NATIVE = REPO_ROOT / "node_modules" / "react-native"


def _compiler() -> str:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("No C++ compiler (g++/c++) on PATH: install build-essential.")
    return compiler


def _include_flags() -> list[str]:
    common = REACT_NATIVE / "ReactCommon"
    if not (common / "jsi" / "jsi" / "jsi.h").is_file():
        pytest.fail(f"{common / 'jsi/jsi/jsi.h'} is missing: run `npm ci` at the repo root first.")
    dirs = [
        common / "jsi",
        common / "callinvoker",
        PACKAGE_DIR / "cpp" / "base" / "include",  # the one Result/Error
        PACKAGE_DIR / "cpp" / "grammar" / "include",  # the runner's constraints
        PACKAGE_DIR / "cpp" / "runner" / "include",
        PACKAGE_DIR / "cpp" / "tokenizer" / "include",
        PACKAGE_DIR / "cpp" / "chat" / "include",  # the seam's renderChatTemplate
        PACKAGE_DIR / "cpp" / "json" / "include",
        SEAM_DIR,
        JSI_DIR,
    ]
    return [f"-I{d}" for d in dirs]


def _compile(source: Path, out: Path) -> None:
    cmd = [_compiler(), "-std=c++20", "-Wall", "-Wextra", "-Werror", "-c", str(source),
           "-o", str(out), *_include_flags()]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{source.name} does not compile:\n{result.stderr}"


def test_binding_compiles_against_the_installed_react_native(tmp_path: Path) -> None:
    pinned = json.loads((PACKAGE_DIR / "package.json").read_text())["devDependencies"]["react-native"]
    installed = json.loads((REACT_NATIVE / "package.json").read_text())["version"]
    assert installed == pinned, f"node_modules has react-native {installed}, the package pins {pinned}"
    sources = sorted([*SEAM_DIR.glob("*.cpp"), *JSI_DIR.glob("*.cpp")])
    assert sources, f"no .cpp files in {SEAM_DIR} or {JSI_DIR}"
    for source in sources:
        _compile(source, tmp_path / f"{source.stem}.o")
        assert (tmp_path / f"{source.stem}.o").stat().st_size > 0


def test_every_binding_header_compiles_on_its_own(tmp_path: Path) -> None:
    headers = sorted([*SEAM_DIR.glob("*.h"), *JSI_DIR.glob("*.h")])
    assert headers
    for header in headers:
        unit = tmp_path / f"{header.stem}_alone.cpp"
        unit.write_text(f'#include "{header.name}"\n')
        _compile(unit, tmp_path / f"{header.stem}_alone.o")


def _seam_methods() -> set[str]:
    seam = (PACKAGE_DIR / "src" / "native" / "seam.ts").read_text()
    body = re.search(r"export interface NativeExecutorch \{(.*?)\n\}", seam, re.S)
    assert body, "interface NativeExecutorch not found in seam.ts"
    return set(re.findall(r"^\s{2}(\w+)\(", body.group(1), re.M))


def _names_in(path: Path, pattern: str) -> set[str]:
    block = re.search(pattern, path.read_text(), re.S)
    assert block, f"{pattern!r} not found in {path.name}"
    return set(re.findall(r'"(\w+)"', block.group(1)))


def test_binding_exposes_exactly_the_typescript_seam() -> None:
    """seam_core's method list (what both hosts enumerate) and each host's dispatch are the
    TypeScript NativeExecutorch interface, name for name."""
    seam = _seam_methods()
    assert len(seam) == 15, seam
    assert _names_in(SEAM_DIR / "seam_core.h", r"kMethodNames\{(.*?)\};") == seam
    assert _names_in(JSI_DIR / "executorch_host_object.cpp", r"kMethods\[\] = \{(.*?)\};") == seam
    # The addon's dispatch names every method but the last, which is its fall-through.
    node = _names_in(PACKAGE_DIR / "cpp" / "node" / "rne_node.cpp",
                     r"napi_callback methodFor\(std::string_view name\) \{(.*?)\n\}")
    assert node | {"release"} == seam


def _ts_fields(interface: str) -> dict[str, bool]:
    """The fields an interface of seam.ts declares itself: name -> optional."""
    seam = (PACKAGE_DIR / "src" / "native" / "seam.ts").read_text()
    body = re.search(rf"export interface {interface}\b[^{{]*\{{(.*?)\n\}}", seam, re.S)
    assert body, f"interface {interface} not found in seam.ts"
    return {name: bool(optional)
            for name, optional in re.findall(r"^\s{2}readonly (\w+)(\?)?:", body.group(1), re.M)}


def test_generate_option_table_reads_exactly_the_typescript_config() -> None:
    """seam_core.cpp's kGenerationOptions has one row per field of NativeGenerationConfig (its
    own and SamplingOptions'), optional where TypeScript's field is optional."""
    table = re.search(r"kGenerationOptions\[\] = \{(.*?)\n\};", (SEAM_DIR / "seam_core.cpp").read_text(),
                      re.S)
    assert table, "kGenerationOptions not found in seam_core.cpp"
    rows = re.findall(r'option<[^>]*>\("(\w+)"(, Presence::kOptional)?\)', table.group(1))
    # The ranged sampler options come in as the generated list's rows, each a required one.
    assert "RNE_SAMPLER_OPTIONS(RNE_SAMPLER_ROW)" in table.group(1)
    generated = (PACKAGE_DIR / "cpp" / "runner" / "include" / "rne" / "runner"
                 / "sampler_ranges.generated.h").read_text()
    rows += [(name, "") for name in re.findall(r'^  X\(\w+, "(\w+)"\)', generated, re.M)]
    assert len(rows) == len({name for name, _ in rows}) >= 9, rows
    typescript = _ts_fields("SamplingOptions") | _ts_fields("NativeGenerationConfig")
    assert {name: bool(optional) for name, optional in rows} == typescript

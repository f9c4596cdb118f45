"""The backend catalog (model-registry/backends.yaml) and every table that derives from it.

A backend's identity is declared once; these tests prove the loader refuses a bad declaration
(naming the file and the field) and that the Python, TypeScript and C++ consumers list exactly
the catalog's backends with the catalog's values.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rne_tools import backend_catalog, registry
from rne_tools.backend_catalog import BackendCatalog, load_catalog, parse_catalog
from rne_tools.binaries import (
    ANDROID_ABIS,
    build_plan,
    load_lock,
    platform_series,
    shared_library,
    sizes,
)
from rne_tools.binaries.platforms import (
    IOS_SLICES,
    LINUX_COMPONENTS,
    backend_flags,
    delegates_flag,
    ios_archives,
    ios_backends,
)
from rne_tools.errors import RegistryError
from rne_tools.export.backends import BACKEND_CODES, backend_names, get_backend
from rne_tools.paths import PACKAGE_DIR, REPO_ROOT
from rne_tools.registry import codegen, schema

CATALOG_TEXT = backend_catalog.CATALOG_FILE.read_text()


@pytest.fixture(scope="module")
def catalog() -> BackendCatalog:
    return load_catalog()


def test_the_declared_backends(catalog: BackendCatalog) -> None:
    assert catalog.platforms == ("ios", "android")
    assert catalog.names() == ("xnnpack", "vulkan", "mlx")
    # The .pte contract: published programs carry these codes, so they never change.
    assert catalog.pte_codes() == {"xnnpack": 1, "vulkan": 2, "mlx": 3}
    assert catalog.preference("ios") == ("mlx", "xnnpack")
    assert catalog.preference("android") == ("vulkan", "xnnpack")
    mlx = catalog.backend("mlx")
    assert (mlx.runtime, mlx.label, mlx.build_flag) == ("MLXBackend", "MLX (GPU)", "EXECUTORCH_BUILD_MLX")
    assert mlx.simulator_rule("ios") == "never"
    assert mlx.architectures == ("gemma4",) and not mlx.takes("llama") and mlx.takes("gemma4")
    assert catalog.backend("xnnpack").takes("llama") and catalog.backend("vulkan").takes("gemma4")
    assert catalog.backend("vulkan").simulator_rule("android") == "explicit_only"
    assert catalog.backend("xnnpack").simulator_rule("ios") == "allowed"
    with pytest.raises(RegistryError, match="unknown backend 'cuda'; backends.yaml declares: xnnpack, vulkan, mlx"):
        catalog.backend("cuda")


def _edited(change: Callable[[dict[str, Any]], None]) -> str:
    doc = yaml.safe_load(CATALOG_TEXT)
    change(doc)
    return yaml.safe_dump(doc, sort_keys=False)


def _error(text: str) -> str:
    with pytest.raises(RegistryError) as info:
        parse_catalog(text, Path("backends.yaml"))
    return str(info.value)


def _mlx(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["backends"][2]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: _mlx(d).pop("runtime"), "backends.yaml: backends[2]: 'runtime' is a required field"),
        (lambda d: _mlx(d).update(colour="blue"), "backends.yaml: backends[2].colour: unknown field"),
        (lambda d: _mlx(d).update(pte_code=1), "backends.yaml: backends[2].pte_code: 1 is already used by backends[0]"),
        (lambda d: _mlx(d).update(pte_code=True), "backends.yaml: backends[2].pte_code: True is not a positive integer"),
        (lambda d: _mlx(d).update(name="vulkan"), "backends.yaml: backends[2].name: 'vulkan' is already used by backends[1]"),
        (lambda d: _mlx(d).update(name="Metal GPU"), "backends.yaml: backends[2].name: 'Metal GPU' is not a lowercase name"),
        (lambda d: _mlx(d).update(runtime="VulkanBackend"), "backends.yaml: backends[2].runtime: 'VulkanBackend' is already used"),
        (lambda d: _mlx(d).update(runtime='MLX"Backend'), "backends.yaml: backends[2].runtime: 'MLX\"Backend' is not a delegate name"),
        (lambda d: _mlx(d).update(build_flag="MLX=ON"), "backends.yaml: backends[2].build_flag: 'MLX=ON' is not EXECUTORCH_BUILD_<NAME>"),
        (lambda d: _mlx(d).update(processor="NPU"), "backends.yaml: backends[2].processor: 'NPU' is not one of CPU, GPU"),
        (lambda d: _mlx(d).update(platforms={"ios": 2}), "backends.yaml: backends[2].platforms.ios: rank 2 is already backends[0]'s"),
        (lambda d: _mlx(d).update(platforms={"web": 1}), "backends.yaml: backends[2].platforms.web: not a platform"),
        (lambda d: _mlx(d).update(platforms={"ios": 0}), "backends.yaml: backends[2].platforms.ios: 0 is not a rank"),
        (lambda d: _mlx(d).update(simulator={"ios": "sometimes"}), "backends.yaml: backends[2].simulator.ios: 'sometimes' is not one of allowed, never, explicit_only"),
        (lambda d: _mlx(d).update(simulator={"android": "never"}), "backends.yaml: backends[2].simulator.android: the backend does not run on 'android'"),
        (lambda d: d.update(backends=[_mlx(d)]), "backends.yaml: platforms: no backend runs on 'android'"),
        (lambda d: d.update(extra=1), "backends.yaml: extra: unknown field"),
        (lambda d: _mlx(d).pop("archives"), "backends.yaml: backends[2]: 'archives' is a required field"),
        (lambda d: _mlx(d)["archives"].pop("linked"), "backends.yaml: backends[2].archives: 'linked' is a required field"),
        (lambda d: _mlx(d)["archives"].update(whole=[]), "backends.yaml: backends[2].archives.whole: empty"),
        (lambda d: _mlx(d)["archives"].update(linked=["../libx.a"]), "backends.yaml: backends[2].archives.linked[0]: '../libx.a' is not a relative path"),
        (lambda d: _mlx(d)["archives"].update(shared=[]), "backends.yaml: backends[2].archives.shared: unknown field"),
        (lambda d: _mlx(d).update(sdk_libraries=["mlx.dll"]), "backends.yaml: backends[2].sdk_libraries: must be a list of shared library names"),
        (lambda d: _mlx(d).update(architectures=["mamba"]), "backends.yaml: backends[2].architectures: must be a non-empty list of architectures (the modules of tools/rne_tools/models: gemma4, llama)"),
        (lambda d: _mlx(d).update(architectures=[]), "backends.yaml: backends[2].architectures: must be a non-empty list"),
    ],
)
def test_a_bad_declaration_names_the_file_and_field(change: Callable, expected: str) -> None:
    assert expected in _error(_edited(change))


def test_every_problem_is_reported_at_once_and_yaml_errors_are_named() -> None:
    message = _error(_edited(lambda d: (_mlx(d).pop("title"), d["backends"][0].update(pte_code=3))))
    assert "backends[2]: 'title' is a required field" in message
    assert "backends[2].pte_code: 3 is already used by backends[0]" in message
    assert "backends.yaml: not valid YAML" in _error("backends: [unclosed\n")
    assert "duplicate key 'name'" in _error(CATALOG_TEXT.replace("name: mlx", "name: mlx\n    name: mlx2"))
    assert "backends.yaml: <root>: must be a mapping" in _error("- xnnpack\n")


# --- consumers -----------------------------------------------------------------------------


def test_python_tables_derive_from_the_catalog(catalog: BackendCatalog) -> None:
    assert BACKEND_CODES == catalog.pte_codes()
    assert backend_names() == sorted(catalog.names())
    for info in catalog.backends:
        backend = get_backend(info.name)
        assert (backend.name, backend.runtime_name) == (info.name, info.runtime)
    assert schema.schema()["$defs"]["backend"]["enum"] == list(catalog.names())
    # The registry's family files are the models; the catalog is not one of them.
    assert backend_catalog.CATALOG_FILE not in registry.registry_files()


def test_native_builds_hold_each_platforms_backends(catalog: BackendCatalog) -> None:
    assert LINUX_COMPONENTS == ("kernels", *catalog.names())
    assert set(catalog.names()) <= set(shared_library.COMPONENTS)
    android = [b.name for b in catalog.backends if "android" in b.platforms]
    assert shared_library.ANDROID_COMPONENTS == ("runtime", "kernels", *android)
    for platform, on in [
        ("ios", catalog.preference("ios")),
        ("android", catalog.preference("android")),
        ("linux", catalog.names()),
    ]:
        plan = build_plan(platform, lock=load_lock(), abis=ANDROID_ABIS, jobs=4,
                          patches=[p.name for p in platform_series(platform)])
        text = json.dumps(plan.to_json())
        for b in catalog.backends:
            assert (f"-D{b.build_flag}=ON" in text) == (b.name in on), (platform, b.name)


def _with_toy_backend(catalog: BackendCatalog) -> BackendCatalog:
    """``catalog`` with a backend added as a new one is: its backends.yaml entry, nothing else
    (a free code and the last rank on every platform, so it fits whatever the catalog holds)."""
    code = max(catalog.pte_codes().values()) + 1
    ranks = ", ".join(f"{p}: {max(b.ranks.get(p, 0) for b in catalog.backends) + 1}"
                      for p in catalog.platforms)
    entry = textwrap.dedent(f"""
      - name: toy_scratch
        title: Toy
        processor: GPU
        runtime: ToyScratchBackend
        pte_code: {code}
        build_flag: EXECUTORCH_BUILD_TOY_SCRATCH
        platforms: {{{ranks}}}
        archives:
          whole: [backends/toy/libtoy_backend.a]
          linked: [backends/toy/libtoy_kernels.a]
          external: [backends/toy/sdk/libtoy_sdk.a]
        sdk_libraries: [libexecutorch_backend_toy.so]
    """)
    return parse_catalog(CATALOG_TEXT + textwrap.indent(entry, "  "), Path("backends.yaml"))


def _missing_from_build_tables(catalog: BackendCatalog) -> list[str]:
    """Where a backend of ``catalog`` is missing from a table the native builds derive from it."""
    missing = []
    components = shared_library.components(catalog)
    android = shared_library.android_components(catalog)
    sdk = sizes.sdk_components(catalog)
    for b in catalog.backends:
        arc = b.archives
        if components.get(b.name) != shared_library.Component(arc.whole, arc.linked + arc.external):
            missing.append(f"{b.name}: shared_library components")
        if ("android" in b.platforms) != (b.name in android):
            missing.append(f"{b.name}: Android components")
        if sdk.get(b.name, ()) != b.sdk_libraries:
            missing.append(f"{b.name}: the SDK size rows")
        if f"-D{b.build_flag}=ON" not in backend_flags(catalog.names(), (b.name,), catalog):
            missing.append(f"{b.name}: the build flags")
        if b.cmake_target not in delegates_flag(catalog).split("=", 1)[1].split(";"):
            missing.append(f"{b.name}: the delegates a from-source build links")
        for s in IOS_SLICES:
            on = b.name in ios_backends(s.simulator, catalog)
            held = set(ios_archives(s, catalog))
            expected = {f"$BUILD/{s.name}/lib/Release/{a.rsplit('/', 1)[-1]}" for a in arc.whole}
            expected |= {f"$BUILD/{s.name}/{a}" for a in arc.external}
            if on != ("ios" in b.platforms and not (s.simulator and b.simulator_rule("ios") == "never")):
                missing.append(f"{b.name}: the backends of iOS slice {s.name}")
            if on and not expected <= held:
                missing.append(f"{b.name}: the archives of iOS slice {s.name}")
    return missing


def test_every_declared_backend_reaches_the_derived_build_tables(catalog: BackendCatalog) -> None:
    """A backend is declared once: its build flag, archives and size row reach every table the
    native builds use, for the real catalog and for one with a new backend added."""
    assert _missing_from_build_tables(catalog) == []
    toy = _with_toy_backend(catalog)
    assert "toy_scratch" in toy.names()
    assert _missing_from_build_tables(toy) == []
    assert "$BUILD/ios-device/backends/toy/sdk/libtoy_sdk.a" in ios_archives(IOS_SLICES[0], toy)
    assert sizes.sdk_components(toy)["toy_scratch"] == ("libexecutorch_backend_toy.so",)
    assert delegates_flag(toy).endswith(";toy_backend")


def _ts_union(text: str, name: str) -> list[str]:
    match = re.search(rf"^export type {name} = (.*);$", text, re.MULTILINE)
    assert match, f"no `export type {name}` in the generated TypeScript"
    return re.findall(r"'([^']*)'", match[1])


def test_generated_typescript_and_cpp_list_exactly_the_catalog(catalog: BackendCatalog) -> None:
    assert codegen.stale_files(registry.load_registry()) == []
    ts = codegen.GENERATED_BACKENDS_TS.read_text()
    assert _ts_union(ts, "Backend") == sorted(catalog.names())
    assert _ts_union(ts, "Platform") == list(catalog.platforms)
    for b in catalog.backends:
        assert f"label: '{b.label}'," in ts
    header = codegen.GENERATED_BACKENDS_H.read_text()
    rows = re.findall(r'^    \{"(\w+)", "(\w+)", (.*)\},$', header, re.MULTILINE)
    assert [(name, runtime) for name, runtime, _ in rows] == sorted(
        (b.name, b.runtime) for b in catalog.backends
    )
    never_on_ios = [name for name, _, rules in rows if rules.split(", ")[0] == "SimulatorRule::kNever"]
    assert never_on_ios == [b.name for b in catalog.backends if b.simulator_rule("ios") == "never"]


def _code_lines(path: Path) -> str:
    """``path`` without its comment lines (comments may name backends; code must not)."""
    comment = re.compile(r"^\s*(//|\*|/\*|#)")
    return "\n".join(line for line in path.read_text().splitlines() if not comment.match(line))


# Consumers that once spelled a backend's identity out themselves.
CONSUMERS = [
    PACKAGE_DIR / "src" / "backend.ts",
    PACKAGE_DIR / "cpp" / "seam" / "seam_core.cpp",
    REPO_ROOT / "apps" / "llm" / "src" / "format.ts",
    REPO_ROOT / "tools" / "rne_tools" / "binaries" / "platforms.py",
    REPO_ROOT / "tools" / "rne_tools" / "checks" / "cpp_runtime.py",
    *(REPO_ROOT / "tools" / "rne_tools" / "export" / "backends" / f"{b}.py" for b in ("xnnpack", "vulkan", "mlx")),
]


@pytest.mark.parametrize("path", CONSUMERS, ids=lambda p: p.name)
def test_consumers_take_the_identity_from_the_catalog(path: Path, catalog: BackendCatalog) -> None:
    code = _code_lines(path)
    for b in catalog.backends:
        for value in (b.runtime, b.build_flag, b.label):
            for quote in ("'", '"'):
                assert f"{quote}{value}{quote}" not in code, f"{path.name} spells out {value}"
        if path.suffix == ".ts":
            # Rules such as "no MLX on the simulator" are the catalog's data, not comparisons.
            assert not re.search(rf"=== '{b.name}'|'{b.name}' ===", code), path.name

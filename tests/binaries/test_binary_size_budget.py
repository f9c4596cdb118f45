"""What each component of our native builds costs an app, per ABI, held to a reviewed budget.

The build manifests record a size table (tools/rne_tools/binaries/sizes.py), in bytes the loader
maps: our core and the ExecuTorch SDK's runtime, kernels and XNNPACK for builds against a wheel's
SDK; per component (runtime, kernels, XNNPACK, Vulkan and its SPIR-V, MLX, the linker's own
bytes) of the one libexecutorch.so a source build links with the Android recipe. Each is checked
against third-party/binary-size-budget.json: a component that grows past its budget fails here,
with its size, so a size regression is a reviewed decision (raise the budget in the same change,
saying why) instead of a surprise in an app. The host (x86-64) manifest is always there when
pytest runs (`make test` builds it first); the others where those builds ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rne_tools.binaries import shared_library
from rne_tools.binaries.platforms import LINUX_CPU_SHARED_LIBRARY_BUILD, LINUX_SHARED_LIBRARY_BUILD
from rne_tools.binaries.sizes import LINKER, shared_library_sizes
from rne_tools.paths import REPO_ROOT

BUDGET = REPO_ROOT / "third-party" / "binary-size-budget.json"
MANIFESTS = {
    "host": REPO_ROOT / "build" / "host" / "manifest.json",
    "linux-arm64": REPO_ROOT / "build" / "linux-arm64" / "manifest.json",
    "linux": REPO_ROOT / "build" / "linux" / "manifest.json",
}
# The budgets of a libexecutorch.so's table (a source build) are kept apart from the wheel
# SDK's: linux-arm64 is built either way (docs/arm64.md).
SHARED = " libexecutorch.so"


def budget_key(build: str, sizes: dict) -> str:
    """The budget a build's size table is held to."""
    return build + SHARED if LINKER in sizes else build


def over_budget(sizes: dict, budget: dict) -> list[str]:
    """Every component over (or missing from) its budget, and every unbudgeted one."""
    problems = [f"{name}: no budget for this component" for name in sizes if name not in budget]
    for name, limit in budget.items():
        if name not in sizes:
            problems.append(f"{name}: budgeted but not measured")
        elif sizes[name]["loaded_bytes"] > limit:
            problems.append(f"{name}: {sizes[name]['loaded_bytes']:,} bytes > budget {limit:,}")
    return problems


def _budgets() -> dict[str, dict[str, int]]:
    return json.loads(BUDGET.read_text())["loaded_bytes"]


@pytest.mark.parametrize("build", sorted(MANIFESTS))
def test_components_fit_their_budget(build):
    manifest = MANIFESTS[build]
    if build != "host" and not manifest.is_file():
        pytest.skip(f"NOT RUN: no {build} build ({manifest}); docs/arm64.md")
    if not manifest.is_file():
        pytest.fail(f"{manifest} is missing: `.venv/bin/python tools/build_binaries.py --platform "
                    "host` writes it")
    entry = json.loads(manifest.read_text())["builds"][build]
    assert "sizes" in entry, f"{manifest} has no size table: rebuild with build_binaries.py"
    sizes = entry["sizes"]
    print(f"\nSIZES {build}: " + ", ".join(
        f"{name} {row['loaded_bytes'] / 1e6:.2f} MB" for name, row in sizes.items()))
    key = budget_key(build, sizes)
    problems = over_budget(sizes, _budgets()[key])
    assert not problems, f"{key}: " + "; ".join(problems)


def test_budget_check_catches_growth_and_gaps():
    sizes = {"core": {"loaded_bytes": 1000}, "xnnpack": {"loaded_bytes": 10}}
    assert over_budget(sizes, {"core": 1000, "xnnpack": 10}) == []
    assert over_budget(sizes, {"core": 999, "xnnpack": 10}) == ["core: 1,000 bytes > budget 999"]
    assert over_budget(sizes, {"core": 1000}) == ["xnnpack: no budget for this component"]
    assert over_budget(sizes, {"core": 1000, "xnnpack": 10, "vulkan": 5}) == [
        "vulkan: budgeted but not measured"]


def test_every_budgeted_build_has_a_manifest_location():
    assert {key.removesuffix(SHARED) for key in _budgets()} == set(MANIFESTS)
    for key, limits in _budgets().items():
        assert limits and all(isinstance(v, int) and v > 0 for v in limits.values()), key
        assert (LINKER in limits) == key.endswith(SHARED), key


def test_opting_out_of_the_gpu_delegates_removes_them():
    """The linux plan links the recipe twice, with and without Vulkan and MLX (the opt-out an
    Android app without Vulkan models builds with --components): without them, neither
    delegate's code nor its shaders are in the library, and the bytes they held are gone."""
    full, cpu = (REPO_ROOT / d / "libexecutorch.so"
                 for d in (LINUX_SHARED_LIBRARY_BUILD, LINUX_CPU_SHARED_LIBRARY_BUILD))
    if not full.is_file():
        pytest.skip(f"NOT RUN: no linux source build ({full}); docs/building-binaries.md")
    assert cpu.is_file(), f"{cpu} is missing: the linux plan links it; rerun --platform linux"
    tables = [shared_library_sizes(so, Path(shared_library.link_map(str(so))),
                                   shared_library.component_of_archive()) for so in (full, cpu)]
    gpu = ("vulkan", "vulkan_spirv", "mlx")
    removed = sum(tables[0][c]["loaded_bytes"] for c in gpu if c in tables[0])
    saved = tables[0]["total"]["loaded_bytes"] - tables[1]["total"]["loaded_bytes"]
    print(f"\nSIZES linux libexecutorch.so: all {tables[0]['total']['loaded_bytes'] / 1e6:.2f} MB, "
          f"without Vulkan and MLX {tables[1]['total']['loaded_bytes'] / 1e6:.2f} MB "
          f"(saves {saved / 1e6:.2f} MB; their rows held {removed / 1e6:.2f} MB)")
    assert removed > 0 and not any(c in tables[1] for c in gpu)
    assert saved >= 0.95 * removed
    assert b"VulkanBackend" in full.read_bytes() and b"VulkanBackend" not in cpu.read_bytes()

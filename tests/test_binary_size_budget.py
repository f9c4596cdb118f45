"""What each component of our native builds costs an app, per ABI, held to a reviewed budget.

The build manifests record a size table (tools/rne_tools/binaries/sizes.py): our core and the
ExecuTorch SDK's runtime, kernels and XNNPACK, in bytes the loader maps. Each is checked against
third-party/binary-size-budget.json: a component that grows past its budget fails here, with its
size, so a size regression is a reviewed decision (raise the budget in the same change, saying
why) instead of a surprise in an app. The host (x86-64) manifest is always there when pytest
runs (`make test` builds it first); the arm64 one where that build ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rne_tools.paths import REPO_ROOT

BUDGET = REPO_ROOT / "third-party" / "binary-size-budget.json"
MANIFESTS = {
    "host": REPO_ROOT / "build" / "host" / "manifest.json",
    "linux-arm64": REPO_ROOT / "build" / "linux-arm64" / "manifest.json",
}


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
    problems = over_budget(sizes, _budgets()[build])
    assert not problems, f"{build}: " + "; ".join(problems)


def test_budget_check_catches_growth_and_gaps():
    sizes = {"core": {"loaded_bytes": 1000}, "xnnpack": {"loaded_bytes": 10}}
    assert over_budget(sizes, {"core": 1000, "xnnpack": 10}) == []
    assert over_budget(sizes, {"core": 999, "xnnpack": 10}) == ["core: 1,000 bytes > budget 999"]
    assert over_budget(sizes, {"core": 1000}) == ["xnnpack: no budget for this component"]
    assert over_budget(sizes, {"core": 1000, "xnnpack": 10, "vulkan": 5}) == [
        "vulkan: budgeted but not measured"]


def test_every_budgeted_build_has_a_manifest_location():
    assert set(_budgets()) == set(MANIFESTS)
    for build, limits in _budgets().items():
        assert limits and all(isinstance(v, int) and v > 0 for v in limits.values()), build
        assert Path(MANIFESTS[build]).name == "manifest.json"

"""tools/publish_binaries.py end to end: real stagings (ELF libraries per ABI, an xcframework's
layout) verified, zipped and uploaded with the real huggingface_hub client to the 127.0.0.1 Hub,
the lock written, the artifacts downloaded back through the lock's URLs; unverified stagings are
refused before anything reaches the server."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from hub_server import RunningHub, serve_hub
from publish_env import TOKEN, hub_env
from rne_tools.paths import REPO_ROOT
from staged_binaries import have_compilers, stage_android

pytestmark = pytest.mark.skipif(not have_compilers(), reason="needs gcc and aarch64-linux-gnu-gcc "
                                "(scripts/setup.sh installs crossbuild-essential-arm64)")
REPO = "software-mansion/react-native-executorch-binaries"
pytest_plugins = ["publish_fixtures"]  # stagings
VERSION = json.loads((REPO_ROOT / "packages/react-native-executorch/package.json").read_text())["version"]


@pytest.fixture
def hub() -> RunningHub:
    with serve_hub({TOKEN: "software-mansion"}) as running:
        yield running


def run(tmp_path: Path, hub: RunningHub, *staged: Path, extra: tuple[str, ...] = ()):
    env = hub_env(tmp_path)
    args = [a for s in staged for a in ("--staged", str(s))]
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "publish_binaries.py"), *args,
         "--endpoint", hub.url, "--out-dir", str(tmp_path / "out"),
         "--lock", str(tmp_path / "binaries.lock.json"), *extra],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300)


def test_publishes_every_set_and_writes_the_lock(tmp_path, hub, stagings):
    result = run(tmp_path, hub, *stagings.values())
    assert result.returncode == 0, result.stderr
    lock = json.loads((tmp_path / "binaries.lock.json").read_text())
    assert lock["version"] == VERSION
    assert lock["base_url"] == f"{hub.url}/{REPO}/resolve/v{VERSION}"
    arts = lock["artifacts"]
    assert sorted(arts) == ["android", "ios"]
    assert sorted(arts["android"]) == ["all", "cpu"] and sorted(arts["ios"]) == ["all", "cpu"]
    assert sorted(arts["android"]["cpu"]) == ["arm64-v8a", "x86_64"]
    assert arts["android"]["all"]["arm64-v8a"]["backends"] == ["vulkan", "xnnpack"]
    assert arts["ios"]["cpu"]["backends"] == ["xnnpack"]
    assert arts["android"]["all"]["arm64-v8a"]["size"] > arts["android"]["cpu"]["arm64-v8a"]["size"]
    so = arts["android"]["cpu"]["x86_64"]["components"]["libexecutorch.so"]
    assert so["bytes"] > 0 and so["loaded_bytes"] > 0
    entries = [arts["ios"]["all"], arts["ios"]["cpu"],
               *arts["android"]["all"].values(), *arts["android"]["cpu"].values()]
    for entry in entries:
        assert entry["file"].startswith(f"{VERSION}/") and entry["file"].endswith(".zip")
        with urllib.request.urlopen(f"{lock['base_url']}/{entry['file']}") as r:
            data = r.read()
        assert len(data) == entry["size"]
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        (tmp_path / "a.zip").write_bytes(data)
        with zipfile.ZipFile(tmp_path / "a.zip") as z:
            manifest = json.loads(z.read("rne-binaries.json"))
            for f in manifest["files"]:
                assert hashlib.sha256(z.read(f["path"])).hexdigest() == f["sha256"]
        assert manifest["version"] == VERSION and manifest["unpacked_size"] == entry["unpacked_size"]
        # The release manifest is published next to its zip.
        with urllib.request.urlopen(f"{lock['base_url']}/{entry['file'][:-4]}.json") as r:
            assert json.loads(r.read()) == manifest
    android = zipfile.ZipFile(tmp_path / "out" / VERSION / "android-arm64-v8a-all.zip").namelist()
    assert "arm64-v8a/libexecutorch.so" in android
    assert "include/executorch/extension/module/module.h" in android
    ios = zipfile.ZipFile(tmp_path / "out" / VERSION / "ios-all.zip").namelist()
    assert {"ExecuTorch.xcframework/Info.plist", "mlx.metallib"} <= set(ios)
    assert "mlx.metallib" not in zipfile.ZipFile(tmp_path / "out" / VERSION / "ios-cpu.zip").namelist()

    # Same bytes again: the tag already holds them, nothing new is committed.
    commits = hub.state.commit_count(REPO)
    again = run(tmp_path, hub, *stagings.values())
    assert again.returncode == 0, again.stderr
    assert "already held these binaries" in again.stdout
    assert hub.state.commit_count(REPO) == commits


def test_dry_run_uploads_nothing_and_writes_no_lock(tmp_path, hub, stagings):
    result = run(tmp_path, hub, stagings["android-cpu"], extra=("--dry-run",))
    assert result.returncode == 0, result.stderr
    assert "android-arm64-v8a-cpu" in result.stdout and "dry run: nothing uploaded" in result.stdout
    assert '"sha256"' in result.stdout
    assert not (tmp_path / "binaries.lock.json").exists()
    assert REPO not in hub.state.repos
    assert "no android all artifact" in result.stderr


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "staging"
    shutil.copytree(src, dst)
    return dst


def _break_manifest(root: Path) -> None:
    (root / "manifest.json").unlink()


def _break_checksum(root: Path) -> None:
    with open(root / "arm64-v8a" / "libexecutorch.so", "r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 0xFF]))


def _break_alignment(root: Path) -> None:
    stage_android(root, vulkan=False, abis=("arm64-v8a",), page=4096)


def _break_abi(root: Path) -> None:
    shutil.copyfile(root / "x86_64" / "libexecutorch.so", root / "arm64-v8a" / "libexecutorch.so")
    # Re-record it, so that only the ABI check can catch it.
    from rne_tools.binaries.manifest import artifact_records, load_manifest, write_manifest
    entry = load_manifest(root / "manifest.json")["builds"]["arm64-v8a"]
    entry["artifacts"] = artifact_records(root, ["arm64-v8a"])
    write_manifest(root / "manifest.json", "android", "arm64-v8a", entry)


@pytest.mark.parametrize("breakage, message", [
    (_break_manifest, "no manifest at"),
    (_break_checksum, "sha256 differs from the manifest"),
    (_break_alignment, "below the 16 KB Google Play requires"),
    (_break_abi, "not arm64-v8a"),
])
def test_unverified_staging_is_refused_before_any_upload(tmp_path, hub, stagings, breakage, message):
    root = _copy(stagings["android-cpu"], tmp_path)
    breakage(root)
    result = run(tmp_path, hub, root)
    assert result.returncode == 1
    assert message in result.stderr and str(root) in result.stderr
    assert REPO not in hub.state.repos
    assert not (tmp_path / "binaries.lock.json").exists()


def test_artifact_over_budget_is_refused(tmp_path, hub, stagings):
    budget = tmp_path / "budget.json"
    budget.write_text(json.dumps({"zip_bytes": {"android": {"all": 10**9, "cpu": 1000}}}))
    result = run(tmp_path, hub, stagings["android-cpu"], extra=("--budget", str(budget)))
    assert result.returncode == 1
    assert "over its budget of 1000" in result.stderr and "libexecutorch.so" in result.stderr
    assert REPO not in hub.state.repos
    assert not list((tmp_path / "out").rglob("*.zip"))


def test_same_set_twice_is_refused(tmp_path, hub, stagings):
    copy = _copy(stagings["android-cpu"], tmp_path)
    result = run(tmp_path, hub, stagings["android-cpu"], copy)
    assert result.returncode == 1 and "android-arm64-v8a-cpu is staged twice" in result.stderr

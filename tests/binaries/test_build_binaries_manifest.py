"""Manifest write/verify, and the executor running a small real plan end to end."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rne_tools.binaries import BuildContext, BuildError, ManifestError, execute, load_lock
from rne_tools.binaries.manifest import artifact_records, verify_manifest, write_manifest
from rne_tools.binaries.patches import patch_series
from rne_tools.binaries.plan import ApplyPatches, Plan, Run, Stage, WriteManifest

PATCH_FIXTURE = Path(__file__).parents[1] / "fixtures" / "patch_tree"


def _staged(root: Path) -> None:
    fw = root / "ExecuTorch.xcframework" / "ios-arm64"
    fw.mkdir(parents=True)
    (fw / "libexecutorch.a").write_bytes(b"!<arch>\n" + bytes(range(256)) * 64)
    (root / "ExecuTorch.xcframework" / "Info.plist").write_text("<plist/>\n")
    (root / "ExecuTorch.xcframework" / "Current").symlink_to("ios-arm64")
    (root / "mlx.metallib").write_bytes(b"MTLB" + b"\x01" * 1000)


def _write(root: Path) -> Path:
    staged = ["ExecuTorch.xcframework", "mlx.metallib"]
    entry = {"source": {"commit": "x"}, "staged": staged, "artifacts": artifact_records(root, staged)}
    path = root / "manifest.json"
    write_manifest(path, "ios", "ios", entry)
    return path


def test_verify_ok_then_every_kind_of_tampering_is_detected(tmp_path):
    _staged(tmp_path)
    path = _write(tmp_path)
    result = verify_manifest(path)
    assert result.ok and result.checked == 4

    lib = tmp_path / "ExecuTorch.xcframework" / "ios-arm64" / "libexecutorch.a"
    data = bytearray(lib.read_bytes())
    data[100] ^= 0xFF  # same size, one byte flipped
    lib.write_bytes(bytes(data))
    assert verify_manifest(path).problems == [
        "ios: ExecuTorch.xcframework/ios-arm64/libexecutorch.a: sha256 differs from the manifest (modified)"
    ]

    (tmp_path / "mlx.metallib").write_bytes(b"MTLB")
    (tmp_path / "ExecuTorch.xcframework" / "Info.plist").unlink()
    (tmp_path / "ExecuTorch.xcframework" / "ios-arm64" / "extra.a").write_bytes(b"x")
    (tmp_path / "ExecuTorch.xcframework" / "Current").unlink()
    (tmp_path / "ExecuTorch.xcframework" / "Current").symlink_to("elsewhere")
    problems = verify_manifest(path).problems
    assert "ios: mlx.metallib: size 4 != recorded 1004" in problems
    assert "ios: ExecuTorch.xcframework/Info.plist: missing" in problems
    assert "ios: ExecuTorch.xcframework/ios-arm64/extra.a: not recorded in the manifest (added)" in problems
    assert "ios: ExecuTorch.xcframework/Current: expected a symlink to ios-arm64" in problems


def test_manifest_is_deterministic_and_keeps_other_builds(tmp_path):
    (tmp_path / "arm64-v8a").mkdir()
    (tmp_path / "x86_64").mkdir()
    (tmp_path / "arm64-v8a" / "libexecutorch.so").write_bytes(b"\x7fELF arm")
    (tmp_path / "x86_64" / "libexecutorch.so").write_bytes(b"\x7fELF x86")
    path = tmp_path / "manifest.json"
    for abi in ("x86_64", "arm64-v8a"):
        staged = [f"{abi}/libexecutorch.so"]
        write_manifest(path, "android", abi, {"staged": staged, "artifacts": artifact_records(tmp_path, staged)})
    first = path.read_bytes()
    staged = ["x86_64/libexecutorch.so"]
    write_manifest(path, "android", "x86_64", {"staged": staged, "artifacts": artifact_records(tmp_path, staged)})
    assert path.read_bytes() == first
    data = json.loads(first)
    assert list(data["builds"]) == ["arm64-v8a", "x86_64"]
    assert verify_manifest(path).ok
    assert not list(tmp_path.glob(".manifest-*"))  # no temporary left behind


def test_missing_or_bad_manifest_is_a_clear_error(tmp_path):
    with pytest.raises(ManifestError, match="no manifest at .*build the platform first"):
        verify_manifest(tmp_path / "manifest.json")
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        verify_manifest(tmp_path / "manifest.json")
    with pytest.raises(ManifestError, match="does not exist; the build did not stage it"):
        artifact_records(tmp_path, ["libexecutorch.so"])


def _git_tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(PATCH_FIXTURE / "tree", src)
    git = ["git", "-C", str(src), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "fixture"], check=True)
    return src


def test_executor_runs_a_real_plan_end_to_end(tmp_path):
    """Patches, a CMake command, staging and the manifest, all executed for real."""
    src = _git_tree(tmp_path)
    series = patch_series(PATCH_FIXTURE / "clean")
    plan = Plan("android", (
        ApplyPatches("apply", "$SOURCE", tuple(str(p.path) for p in series)),
        Run("copy the patched kernel as the 'library'",
            ("cmake", "-E", "copy", "$SOURCE/src/kernel.cpp", "$BUILD/out/libexecutorch.so"),
            inputs=("$SOURCE/src/kernel.cpp",)),
        Stage("stage", "$BUILD/out/libexecutorch.so", "$REPO/third-party/android/x86_64/libexecutorch.so"),
        WriteManifest("manifest", "$REPO/third-party/android/manifest.json", "$REPO/third-party/android",
                      "x86_64", ("x86_64/libexecutorch.so",), (("x86_64", ("-DFOO=ON",)),)),
    ))
    lock = load_lock()
    repo = tmp_path / "repo"
    repo.mkdir()
    ctx = BuildContext(repo=repo, build=tmp_path / "build", python=sys.executable, lock=lock,
                       ref=lock.commit, source=src, patches=series, tool_versions={"cmake": "4.4.4"},
                       base_env=dict(os.environ))
    execute(plan, ctx)

    staged = repo / "third-party" / "android" / "x86_64" / "libexecutorch.so"
    assert "return x * 3;" in staged.read_text()
    manifest = json.loads((repo / "third-party" / "android" / "manifest.json").read_text())
    entry = manifest["builds"]["x86_64"]
    assert entry["patches"] == [{"name": p.name, "sha256": p.sha256} for p in series]
    assert entry["source"]["matches_lock"] is False  # the fixture tree is not ExecuTorch
    assert entry["cmake_flags"] == {"x86_64": ["-DFOO=ON"]}
    assert entry["tools"] == {"cmake": "4.4.4"}
    assert entry["artifacts"][0]["size"] == staged.stat().st_size
    assert verify_manifest(repo / "third-party" / "android" / "manifest.json").ok
    assert (tmp_path / "build" / "logs" / "02-copy-the-patched-kernel-as-the-library.log").is_file()

    execute(plan, ctx)  # again on the already patched tree: patches skip, staging replaces
    assert verify_manifest(repo / "third-party" / "android" / "manifest.json").ok


def test_executor_reports_missing_inputs_and_failed_commands(tmp_path):
    lock = load_lock()
    ctx = BuildContext(repo=tmp_path, build=tmp_path / "build", python=sys.executable, lock=lock,
                       ref=lock.commit)
    (tmp_path / "build" / "lib").mkdir(parents=True)
    (tmp_path / "build" / "lib" / "libother.a").write_bytes(b"")
    missing = Plan("ios", (Run("merge", ("cmake", "-E", "true"), inputs=("$BUILD/lib/libxnnpack.a",)),))
    with pytest.raises(BuildError, match=r"(?s)inputs are missing.*libxnnpack.a is missing.*holds: libother.a"):
        execute(missing, ctx)

    failing = Plan("ios", (Run("configure", ("cmake", "-E", "cat", "$BUILD/nope.txt")),))
    with pytest.raises(BuildError) as info:
        execute(failing, ctx)
    message = str(info.value)
    assert "step 'configure' failed" in message and "full log:" in message and "nope.txt" in message


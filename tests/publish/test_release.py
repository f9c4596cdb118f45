"""tools/release.py end to end against the 127.0.0.1 Hub (tests/hub_server.py): realistic
stagings of every platform and backend set (tests/staged_binaries.py) and the tiny SmolLM2 export
from the export cache, released with --dry-run (nothing uploaded, nothing written in the repo),
then for real on copies of the lock and the registry; refusals happen before any upload."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from hub_server import Repo, RunningHub, _add_commit, _regular, serve_hub
from publish_env import TOKEN, hub_env, registry_files
from rne_tools import registry
from rne_tools.binaries.release import LOCK_PATH
from rne_tools.paths import REGISTRY_DIR, REPO_ROOT
from rne_tools.registry import codegen
from staged_binaries import have_compilers

pytestmark = pytest.mark.skipif(not have_compilers(), reason="needs gcc and aarch64-linux-gnu-gcc "
                                "(scripts/setup.sh installs crossbuild-essential-arm64)")
pytest_plugins = ["publish_fixtures"]  # stagings, tiny_export, exports_dir, reg_dir
BINARIES = "software-mansion/react-native-executorch-binaries"
MODEL_REPO = "software-mansion/react-native-executorch-smollm2"
VERSION = json.loads((REPO_ROOT / "packages/react-native-executorch/package.json").read_text())["version"]


@pytest.fixture
def hub() -> RunningHub:
    with serve_hub({TOKEN: "software-mansion"}) as running:
        yield running


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    copy = tmp_path / "binaries.lock.json"
    shutil.copyfile(LOCK_PATH, copy)
    return copy


def release(tmp_path: Path, hub: RunningHub, staged: list[Path], *extra: str,
            reg: Path, exports: Path | None, lock: Path, version: str = VERSION):
    args = [a for s in staged for a in ("--staged", str(s))]
    args += ["--exports-dir", str(exports)] if exports else []
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "release.py"), "--version", version, *args,
         "--model", "smollm2_135m:xnnpack",
         "--registry-dir", str(reg), "--ts-output", str(tmp_path / "registry.generated.ts"),
         "--allow-random-weights", "--endpoint", hub.url, "--out-dir", str(tmp_path / "out"),
         "--lock", str(lock), *extra],
        capture_output=True, text=True, cwd=REPO_ROOT, env=hub_env(tmp_path), timeout=600)


def _repo_files() -> dict[str, bytes]:
    """What a release writes in the repository by default: the lock, registry, generated TS."""
    return {**{p.as_posix(): p.read_bytes() for p in (LOCK_PATH, codegen.GENERATED_TS)},
            **registry_files(REGISTRY_DIR)}


def test_dry_run_plans_everything_and_changes_nothing(tmp_path, hub, stagings, reg_dir,
                                                      exports_dir, lock, tiny_export):
    before, reg_before, lock_before = _repo_files(), registry_files(reg_dir), lock.read_bytes()
    result = release(tmp_path, hub, list(stagings.values()), "--dry-run",
                     reg=reg_dir, exports=exports_dir, lock=lock)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for name in ("android-arm64-v8a-all", "android-x86_64-cpu", "ios-all", "ios-cpu"):
        assert f"  {name} " in out and f"{name}.zip" in out  # the plan and the lock to write
    for step in ("ios-all  staged", "android-cpu  staged"):
        assert step in out
    pte = next(line for line in out.splitlines() if "xnnpack/smollm2_135m_xnnpack_8w.pte" in line)
    assert f" {tiny_export.report['size']} bytes" in pte and tiny_export.report["sha256"] in pte
    assert f"{BINARIES}: new repository" in out and f"{MODEL_REPO}: new repository" in out
    assert "upload: " in out and "npm pack (dry run): react-native-executorch-" in out
    assert f'"version": "{VERSION}"' in out and "dry run: nothing built or uploaded" in out
    # Nothing reached the Hub but reads; nothing written but in temporary directories.
    assert not hub.state.repos and not [r for r in hub.state.requests if r[0] != "GET"]
    assert lock.read_bytes() == lock_before and registry_files(reg_dir) == reg_before
    assert not (tmp_path / "registry.generated.ts").exists() and not (tmp_path / "out").exists()
    assert _repo_files() == before


def test_release_publishes_locks_and_packs(tmp_path, hub, stagings, reg_dir, exports_dir, lock,
                                           tiny_export):
    before = _repo_files()
    result = release(tmp_path, hub, list(stagings.values()),
                     reg=reg_dir, exports=exports_dir, lock=lock)
    assert result.returncode == 0, result.stderr
    assert f"released {VERSION}" in result.stdout

    tag = f"v{VERSION}"
    written = json.loads(lock.read_text())
    assert written["version"] == VERSION
    assert written["base_url"] == f"{hub.url}/{BINARIES}/resolve/{tag}"
    assert sorted(written["artifacts"]["android"]) == ["all", "cpu"]
    assert sorted(written["artifacts"]["ios"]) == ["all", "cpu"]
    binaries = hub.state.repos[BINARIES]
    head = binaries.commits[binaries.tags[tag]]
    entry = written["artifacts"]["android"]["cpu"]["arm64-v8a"]
    assert hub.state.lfs_objects[head.files[entry["file"]].sha256] == \
        (tmp_path / "out" / entry["file"]).read_bytes()

    spec = registry.load_registry(reg_dir).model("smollm2_135m")
    assert spec.revision == tag and spec.variant("xnnpack").published
    assert spec.variant("xnnpack").pte.sha256 == tiny_export.report["sha256"]
    assert tag in hub.state.repos[MODEL_REPO].tags
    ts = (tmp_path / "registry.generated.ts").read_text()
    assert ts == codegen.generate_typescript(registry.load_registry(reg_dir))

    tarball = tmp_path / "out" / f"react-native-executorch-{VERSION}.tgz"
    with tarfile.open(tarball) as tar:
        assert json.load(tar.extractfile("package/package.json"))["version"] == VERSION
        assert "package/binaries.lock.json" in tar.getnames()
    assert _repo_files() == before

    # The same release again: every tag already holds these bytes, nothing is committed.
    commits = (hub.state.commit_count(BINARIES), hub.state.commit_count(MODEL_REPO))
    again = release(tmp_path, hub, list(stagings.values()), "--no-pack",
                    reg=reg_dir, exports=exports_dir, lock=lock)
    assert again.returncode == 0, again.stderr
    assert "already held these binaries" in again.stdout and "already held these files" in again.stdout
    assert (hub.state.commit_count(BINARIES), hub.state.commit_count(MODEL_REPO)) == commits


def test_a_model_tag_with_other_files_stops_the_release_before_any_upload(
        tmp_path, hub, stagings, reg_dir, exports_dir, lock):
    # The model's repository already has this version's tag, on other files.
    repo = hub.state.repos[MODEL_REPO] = Repo(MODEL_REPO)
    repo.tags[f"v{VERSION}"] = _add_commit(repo, "main", "another release",
                                           {"README.md": _regular(b"another release\n")}).oid
    reg_before, lock_before = registry_files(reg_dir), lock.read_bytes()
    result = release(tmp_path, hub, list(stagings.values()), "--no-pack",
                     reg=reg_dir, exports=exports_dir, lock=lock)
    assert result.returncode == 1
    assert f"{MODEL_REPO} already has tag v{VERSION} with other files" in result.stderr
    assert "bump the package version" in result.stderr
    # The binaries, published first, verified; still nothing is uploaded until every tag is checked.
    assert BINARIES not in hub.state.repos and hub.state.commit_count(MODEL_REPO) == 1
    assert lock.read_bytes() == lock_before and registry_files(reg_dir) == reg_before


def test_an_unverified_staging_stops_the_models_too(tmp_path, hub, stagings, reg_dir,
                                                     exports_dir, lock):
    broken = tmp_path / "android-cpu"
    shutil.copytree(stagings["android-cpu"], broken)
    (broken / "x86_64" / "libexecutorch.so").write_bytes(b"\x7fELF truncated")
    result = release(tmp_path, hub, [broken], "--no-build", "--no-pack",
                     reg=reg_dir, exports=exports_dir, lock=lock)
    assert result.returncode == 1
    assert str(broken) in result.stderr and "does not match its manifest" in result.stderr
    assert not hub.state.repos


def test_a_version_other_than_the_package_s_is_refused(tmp_path, hub, stagings, reg_dir,
                                                       exports_dir, lock):
    result = release(tmp_path, hub, [stagings["android-cpu"]], "--dry-run",
                     reg=reg_dir, exports=exports_dir, lock=lock, version="99.0.0")
    assert result.returncode == 1
    assert f"is at {VERSION}" in result.stderr and "npm version 99.0.0" in result.stderr


def test_export_runs_the_export_pipeline_with_the_registry_s_recipe(tmp_path, hub, reg_dir, lock,
                                                                     tiny_export):
    # The registry copy's recipe is the cached tiny export's: the pipeline finds it, verified.
    result = release(tmp_path, hub, [], "--export", "--random-config", "tiny", "--no-build",
                     "--no-pack", "--dry-run", reg=reg_dir, exports=None, lock=lock)
    assert result.returncode == 0, result.stderr
    assert f"export {tiny_export.pte_path.name}: verification passed" in result.stdout
    assert "not in the export cache" not in result.stdout
    pte = next(line for line in result.stdout.splitlines() if line.strip().startswith("xnnpack/"))
    assert tiny_export.report["sha256"] in pte
    assert not hub.state.repos and not (tmp_path / "out").exists()


def test_the_build_step_builds_what_the_host_can_and_says_why_it_skips_the_rest(stagings):
    from rne_tools.release import plan_builds

    # A host with the NDK but no Xcode, given the Android CPU-only staging.
    steps = plan_builds([stagings["android-cpu"]], True,
                        can_build=lambda p: None if p == "android" else "iOS builds need Xcode")
    got = {f"{s.platform}-{s.backend_set}": s for s in steps}
    assert got["android-cpu"].action == "staged"
    assert got["android-cpu"].detail == str(stagings["android-cpu"])
    assert got["android-all"].action == "build"
    assert got["android-all"].command[1:] == (str(REPO_ROOT / "tools" / "build_binaries.py"),
                                              "--platform", "android")
    assert (got["ios-all"].action, got["ios-all"].detail) == ("skip", "iOS builds need Xcode")
    assert got["ios-cpu"].action == "skip" and "stage a CPU-only xcframework" in got["ios-cpu"].detail
    # Without a staging the CPU set is built first, so that "all" is what third-party/ keeps.
    order = [(s.platform, s.backend_set, s.command[3:]) for s in
             plan_builds([], True, can_build=lambda p: None) if s.action == "build"]
    assert order == [("ios", "all", ("ios",)), ("android", "cpu", ("android", "--components",
                                                                  "xnnpack")),
                     ("android", "all", ("android",))]
    assert {s.action for s in plan_builds([], False, can_build=lambda p: None)} == {"skip"}

"""`build_binaries.py --platform linux-arm64` without building: its plan, the pinned aarch64 SDK
wheel, preflight's apt-get line, and the size table's ELF measure (the emulated run of what it
builds is tests/runner/test_arm64_emulated.py)."""

from __future__ import annotations

import hashlib
import importlib
import json
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rne_tools.binaries import (
    BuildError,
    build_plan,
    load_lock,
    platform_series,
    preflight,
    shared_library,
    wheel_sdk,
)
from rne_tools.binaries.plan import ApplyPatches, Run, WriteManifest
from rne_tools.binaries.platforms import ARM64_TOOLCHAIN
from rne_tools.binaries.sizes import loaded_bytes
from rne_tools.paths import REPO_ROOT

EXPECTED = REPO_ROOT / "tests" / "fixtures" / "build_plans" / "linux-arm64.json"
EXPECTED_SOURCE = REPO_ROOT / "tests" / "fixtures" / "build_plans" / "linux-arm64-source.json"
# The package exports the function under the module's name: the module itself, to patch it.
preflight_mod = importlib.import_module("rne_tools.binaries.preflight")
CLI = [sys.executable, str(REPO_ROOT / "tools" / "build_binaries.py")]


def _plan():
    return build_plan("linux-arm64", lock=load_lock(), patches=[], jobs=4)


def test_plan_matches_reviewed_expected_plan():
    assert _plan().to_json() == json.loads(EXPECTED.read_text())
    out = subprocess.run([*CLI, "--platform", "linux-arm64", "--dry-run", "--json", "--jobs", "4"],
                         capture_output=True, text=True, check=True).stdout
    assert out == EXPECTED.read_text()


def _source_plan():
    return build_plan("linux-arm64", lock=load_lock(), jobs=4, from_source=True,
                      patches=[p.name for p in platform_series("linux")])


def test_source_plan_matches_reviewed_expected_plan():
    assert _source_plan().to_json() == json.loads(EXPECTED_SOURCE.read_text())
    out = subprocess.run([*CLI, "--platform", "linux-arm64", "--from-source", "--dry-run",
                          "--json", "--jobs", "4"], capture_output=True, text=True,
                         check=True).stdout
    assert out == EXPECTED_SOURCE.read_text()


def test_source_plan_is_the_android_recipe_cross_built_from_the_locked_source():
    steps = _source_plan().steps
    assert isinstance(steps[0], ApplyPatches)  # the tree the linux build patches, same series
    assert [Path(p).name for p in steps[0].patches] == [Path(p.name).name
                                                        for p in platform_series("linux")]
    runs = [s for s in steps if isinstance(s, Run)]
    et = next(s for s in runs if s.description.startswith("configure ExecuTorch for aarch64"))
    assert et.argv[:5] == ("cmake", "-S", "$SOURCE", "-B",
                           "$CACHE/build/executorch-cff6f4dd32e6-aarch64")
    assert f"-DCMAKE_TOOLCHAIN_FILE={ARM64_TOOLCHAIN}" in et.argv
    kleidiai = next(s for s in load_lock().extra_sources if s.name == "kleidiai")
    assert f"-DKLEIDIAI_SOURCE_DIR=$CACHE/sources/kleidiai-{kleidiai.commit[:12]}" in et.argv
    for flag in ("EXECUTORCH_BUILD_XNNPACK=ON", "EXECUTORCH_BUILD_KERNELS_LLM=ON",
                 "EXECUTORCH_BUILD_VULKAN=OFF", "EXECUTORCH_BUILD_MLX=OFF"):
        assert f"-D{flag}" in et.argv
    so = next(s for s in runs if s.description.startswith("configure the aarch64 libexecutorch"))
    whole, linked = shared_library.archives("$CACHE/build/executorch-cff6f4dd32e6-aarch64",
                                            ("runtime", "kernels", "xnnpack"), arm64=True)
    assert f"-DRNE_WHOLE_ARCHIVES={';'.join(whole)}" in so.argv
    assert f"-DRNE_ARCHIVES={';'.join(linked)}" in so.argv
    core = next(s for s in runs if s.description.startswith("configure the C++ core"))
    library = "$REPO/build/linux-arm64-shared/so/libexecutorch.so"
    assert f"-DRNE_EXECUTORCH_SHARED_LIBRARY={library}" in core.argv
    assert not any(a.startswith("-Dexecutorch_DIR") for a in core.argv)
    assert isinstance(steps[-1], WriteManifest) and steps[-1].sizes == library
    assert not any(a.startswith("/") and a != "/usr/src/googletest" for s in runs for a in s.argv)


def test_from_source_is_refused_where_it_does_not_apply():
    done = subprocess.run([*CLI, "--platform", "host", "--from-source", "--dry-run"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "--from-source only applies to --platform linux-arm64" in done.stderr
    done = subprocess.run([*CLI, "--platform", "linux-arm64", "--components", "xnnpack",
                           "--dry-run"], capture_output=True, text=True)
    assert done.returncode == 1 and "--components only applies" in done.stderr


def test_plan_cross_compiles_against_the_pinned_sdk_and_records_sizes():
    steps = _plan().steps
    runs = [s for s in steps if isinstance(s, Run)]
    core = next(s for s in runs if s.description.startswith("configure the C++ core"))
    pin = wheel_sdk.load_pin()
    assert any(a.endswith("cmake/aarch64-linux-gnu.toolchain.cmake") for a in core.argv)
    assert f"-Dexecutorch_DIR=$CACHE/sdk/{pin.sdk_name}/executorch/lib/cmake/executorch" in core.argv
    assert not any("march" in a for s in runs for a in s.argv)
    # Only placeholders and Debian's googletest package path: nothing of this machine.
    assert not any(a.startswith("/") and a != "/usr/src/googletest" for s in runs for a in s.argv)
    assert isinstance(steps[-1], WriteManifest) and steps[-1].sizes == "wheel"
    assert steps[-1].build == "linux-arm64"


def test_cli_refuses_source_options():
    done = subprocess.run([*CLI, "--platform", "linux-arm64", "--abi", "x86_64", "--dry-run"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "--abi do not apply" in done.stderr


def test_the_aarch64_sdk_is_the_release_the_host_build_links():
    pin = wheel_sdk.load_pin()
    assert pin.requirement == load_lock().wheel  # the same executorch==X as tools/requirements.txt
    assert pin.file.startswith(pin.requirement.replace("==", "-") + "-")
    assert pin.platform in pin.file and "aarch64" in pin.platform


def _fake_wheel(path: Path) -> str:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("executorch/lib/cmake/executorch/executorch-config.cmake", "# fake\n")
        z.writestr("executorch/lib/libexecutorch.so", b"\x7fELF")
        z.writestr("executorch/exir/__init__.py", "")  # Python: never unpacked
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sdk_is_unpacked_once_and_a_wrong_hash_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "sdk"
    (root / "wheels").mkdir(parents=True)
    name = "executorch-1.5.1-cp311-cp311-manylinux_2_28_aarch64.whl"
    digest = _fake_wheel(root / "wheels" / name)
    pin = wheel_sdk.WheelPin("executorch==1.5.1", name, digest, "manylinux_2_28_aarch64", "3.11")
    out = wheel_sdk.ensure_sdk(pin, root)
    assert (out / "executorch" / "lib" / "libexecutorch.so").is_file()
    assert not (out / "executorch" / "exir").exists()
    assert wheel_sdk.ensure_sdk(pin, root) == out  # the stamp: nothing fetched again

    # Bytes that are not the pinned ones are refused and deleted, never unpacked: our own check,
    # whatever pip (here a stand-in that "downloads" tampered bytes, no network) let through.
    other = tmp_path / "other"

    def fake_pip(argv, **kwargs):
        (other / "wheels").mkdir(parents=True, exist_ok=True)
        (other / "wheels" / name).write_bytes(b"tampered")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(wheel_sdk.subprocess, "run", fake_pip)
    with pytest.raises(BuildError, match="the pin says"):
        wheel_sdk.ensure_sdk(pin, other)
    assert not (other / "wheels" / name).exists() and not (other / pin.sdk_name).exists()


def test_a_malformed_pin_is_a_clear_error(tmp_path):
    pin = tmp_path / "pin.json"
    pin.write_text(json.dumps({"requirement": "executorch==1.5.1", "file": "x.whl",
                               "sha256": "abc", "platform": "p", "python_version": "3.11"}))
    with pytest.raises(BuildError, match="not 64 hex digits"):
        wheel_sdk.load_pin(pin)
    pin.write_text("{}")
    with pytest.raises(BuildError, match="lacks requirement, file, sha256"):
        wheel_sdk.load_pin(pin)


def _tool(bindir: Path, name: str, script: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_preflight_names_the_missing_debian_packages(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _tool(bindir, "git", 'echo "git version 2.39.5"')
    _tool(bindir, "cmake", 'echo "cmake version 4.4.4"')
    _tool(bindir, "ninja", 'echo "1.13.2"')
    _tool(bindir, "ccache", 'echo "ccache version 4.8"')
    monkeypatch.setattr(preflight_mod, "ARM64_SYSROOT", tmp_path / "no-sysroot")
    report = preflight("linux-arm64", python=sys.executable, env={"PATH": str(bindir)},
                       system="Linux")
    (problem,) = [p for p in report.problems if "Debian packages" in p.what]
    assert "crossbuild-essential-arm64" in problem.what and "qemu-user" in problem.what
    assert problem.fix.startswith("apt-get update && apt-get install -y ")
    assert "crossbuild-essential-arm64" in problem.fix and "qemu-user" in problem.fix

    _tool(bindir, "aarch64-linux-gnu-g++", 'echo "aarch64-linux-gnu-g++ (Debian 12.2.0-14) 12.2.0"')
    _tool(bindir, "qemu-aarch64", 'echo "qemu-aarch64 version 7.2.19"')
    sysroot = tmp_path / "sysroot"
    (sysroot / "lib").mkdir(parents=True)
    (sysroot / "lib" / "ld-linux-aarch64.so.1").write_text("")
    monkeypatch.setattr(preflight_mod, "ARM64_SYSROOT", sysroot)
    report = preflight("linux-arm64", python=sys.executable, env={"PATH": str(bindir)},
                       system="Linux")
    googletest_installed = Path("/usr/src/googletest/CMakeLists.txt").is_file()
    assert [p.what for p in report.problems] == (
        [] if googletest_installed else
        ["the arm64 cross build needs Debian packages that are not installed: googletest"])
    assert report.versions["aarch64 C++ compiler"] == "12.2.0"
    assert report.versions["qemu-aarch64"] == "7.2.19"


def test_loaded_bytes_sums_the_load_segments(tmp_path):
    compiler = "cc"
    source = tmp_path / "big.c"
    # 64 KiB of initialised data: the loadable size grows by it, whatever the toolchain adds.
    source.write_text("char rne_blob[65536] = {1};\nint rne_probe(void) { return rne_blob[3]; }\n")
    small = tmp_path / "small.c"
    small.write_text("int rne_probe(void) { return 1; }\n")
    for src in (source, small):
        subprocess.run([compiler, "-shared", "-fPIC", str(src), "-o", str(src.with_suffix(".so"))],
                       check=True)
    grown = loaded_bytes(source.with_suffix(".so")) - loaded_bytes(small.with_suffix(".so"))
    assert 65536 <= grown < 65536 + 8192

"""Preflight probes real executables: fake tools on a private PATH stand in for the toolchains."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rne_tools.binaries import PreflightError, preflight
from rne_tools.paths import REPO_ROOT


def _tool(bindir: Path, name: str, script: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _fake_python(bindir: Path, missing=(), executorch="1.5.1") -> str:
    payload = json.dumps({"missing": list(missing), "executorch": executorch})
    _tool(bindir, "python", f"echo '{payload}'")
    return str(bindir / "python")


def _common_tools(bindir: Path, cmake="4.4.4") -> None:
    _tool(bindir, "git", 'echo "git version 2.39.5"')
    _tool(bindir, "cmake", f'echo "cmake version {cmake}"')
    _tool(bindir, "ninja", 'echo "1.13.2"')


def _fake_ndk(root: Path, revision="27.2.12479018") -> Path:
    ndk = root / "ndk"
    (ndk / "build" / "cmake").mkdir(parents=True)
    (ndk / "build" / "cmake" / "android.toolchain.cmake").write_text("# fake\n")
    (ndk / "source.properties").write_text(f"Pkg.Desc = Android NDK\nPkg.Revision = {revision}\n")
    return ndk


def _fake_vulkan_sdk(root: Path, shaderc="v2025.5", dot_product=True) -> Path:
    """A Vulkan SDK whose glslc reports ``shaderc`` and compiles (or rejects) the probe."""
    sdk = root / "vulkan-sdk"
    (sdk / "bin").mkdir(parents=True)
    compile_case = 'touch "$4"' if dot_product else (
        'echo "error: \'GL_EXT_integer_dot_product\' : extension not supported" >&2; exit 1')
    _tool(sdk / "bin", "glslc", f"""
case "$1" in
  --version) echo "shaderc {shaderc} {shaderc}"; echo "Target: SPIR-V 1.0" ;;
  *) {compile_case} ;;
esac""")
    return sdk


def _android_env(bindir: Path, tmp_path: Path, **sdk) -> dict:
    return {"PATH": str(bindir), "ANDROID_NDK": str(_fake_ndk(tmp_path)),
            "VULKAN_SDK": str(_fake_vulkan_sdk(tmp_path, **sdk))}


@pytest.fixture
def bindir(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    return d


def test_everything_missing_is_reported_in_one_message(bindir, tmp_path):
    python = _fake_python(tmp_path, missing=["torchgen"])  # bindir (the PATH) stays empty
    report = preflight("android", python=python, env={"PATH": str(bindir)}, system="Linux")

    whats = [p.what for p in report.problems]
    assert any(w.startswith("git: not found") for w in whats)
    assert any(w.startswith("cmake: not found") for w in whats)
    assert any(w.startswith("ninja: not found") for w in whats)
    assert "Android NDK: ANDROID_NDK is not set" in whats
    assert "Vulkan SDK: VULKAN_SDK is not set" in whats
    assert any("torchgen" in w for w in whats)
    with pytest.raises(PreflightError) as info:
        report.raise_if_failed()
    message = str(info.value)
    assert message.startswith("cannot build --platform android: 6 requirement(s)")
    assert message.count("fix:") == 6
    assert "export ANDROID_NDK=" in message and "pip install cmake" in message
    assert "export VULKAN_SDK=" in message and "vulkan.lunarg.com" in message


def test_android_ok_records_versions(bindir, tmp_path):
    _common_tools(bindir)
    python = _fake_python(bindir)
    report = preflight("android", python=python, env=_android_env(bindir, tmp_path), system="Linux")
    assert report.problems == []
    assert report.versions["Android NDK"] == "27.2.12479018"
    assert report.versions["glslc (Vulkan SDK)"] == "2025.5"
    assert report.versions["cmake"] == "4.4.4"
    report.raise_if_failed()


def test_old_ndk_old_glslc_and_old_cmake(bindir, tmp_path):
    _common_tools(bindir, cmake="3.25.1")
    python = _fake_python(bindir)
    env = _android_env(bindir, tmp_path, shaderc="v2022.1")
    env["ANDROID_NDK"] = str(_fake_ndk(tmp_path / "old", revision="25.1.8937393"))
    report = preflight("android", python=python, env=env, system="Linux")
    whats = [p.what for p in report.problems]
    assert "cmake: version 3.25.1 is older than the required 3.29" in whats
    assert "Android NDK: version 25.1.8937393 is older than r27" in whats
    assert "glslc (Vulkan SDK): version 2022.1 is older than the required 2023.1" in whats


def test_a_glslc_without_integer_dot_product_is_refused(bindir, tmp_path):
    """The NDK's and Debian's glslc report recent shaderc versions yet reject the extension."""
    _common_tools(bindir)
    env = _android_env(bindir, tmp_path, dot_product=False)
    report = preflight("android", python=_fake_python(bindir), env=env, system="Linux")
    glslc = Path(env["VULKAN_SDK"]) / "bin" / "glslc"
    assert [p.what for p in report.problems] == [
        f"glslc (Vulkan SDK): {glslc} rejects GL_EXT_integer_dot_product"]
    assert "LunarG Vulkan SDK" in report.problems[0].fix


def test_vulkan_sdk_without_glslc(bindir, tmp_path):
    _common_tools(bindir)
    env = _android_env(bindir, tmp_path)
    (Path(env["VULKAN_SDK"]) / "bin" / "glslc").unlink()
    report = preflight("android", python=_fake_python(bindir), env=env, system="Linux")
    assert [p.what for p in report.problems] == ["glslc (Vulkan SDK): not found"]


def test_ndk_dir_that_is_not_an_ndk(bindir, tmp_path):
    _common_tools(bindir)
    python = _fake_python(bindir)
    env = _android_env(bindir, tmp_path)
    env["ANDROID_NDK"] = str(tmp_path)
    report = preflight("android", python=python, env=env, system="Linux")
    assert [p.what for p in report.problems] == [
        f"Android NDK: ANDROID_NDK={tmp_path} has no build/cmake/android.toolchain.cmake"
    ]


def test_ios_needs_macos(bindir):
    _common_tools(bindir)
    report = preflight("ios", python=_fake_python(bindir), env={"PATH": str(bindir)}, system="Linux")
    assert [p.what for p in report.problems] == ["iOS builds need macOS with Xcode; this host is Linux"]


def _fake_xcode(bindir: Path, xcode="16.2", sdk="18.2", metal=True, make=True) -> None:
    _tool(bindir, "xcodebuild", f'echo "Xcode {xcode}"; echo "Build version 16C5032a"')
    if make:  # the command line tools' make, which builds MLX under the Xcode generator
        _tool(bindir, "make", 'echo "GNU Make 3.81"')
    metal_case = 'echo "Apple metal version 32023.404 (metalfe-32023.404)"' if metal else "exit 1"
    _tool(bindir, "xcrun", f"""
case "$*" in
  *--show-sdk-version*) echo "{sdk}" ;;
  *"metal --version"*) {metal_case} ;;
  *--find*) echo "/fake/usr/bin/tool" ;;
  *) exit 1 ;;
esac""")


def test_ios_on_macos_ok(bindir):
    _common_tools(bindir)
    _fake_xcode(bindir)
    report = preflight("ios", python=_fake_python(bindir), env={"PATH": str(bindir)}, system="Darwin")
    assert report.problems == []
    assert report.versions["xcodebuild"] == "16.2"
    assert report.versions["iOS SDK"] == "18.2"
    assert report.versions["metal"] == "32023.404"
    assert report.versions["make"] == "3.81"


def test_ios_without_make(bindir):
    _common_tools(bindir)
    _fake_xcode(bindir, make=False)
    report = preflight("ios", python=_fake_python(bindir), env={"PATH": str(bindir)}, system="Darwin")
    assert [p.what for p in report.problems] == ["make: not found on PATH"]
    assert "xcode-select --install" in report.problems[0].fix


def test_ios_old_xcode_and_missing_metal(bindir):
    _common_tools(bindir)
    _fake_xcode(bindir, xcode="14.3", sdk="16.4", metal=False)
    report = preflight("ios", python=_fake_python(bindir), env={"PATH": str(bindir)}, system="Darwin")
    whats = [p.what for p in report.problems]
    assert "xcodebuild: version 14.3 is older than the required 15.0" in whats
    assert "iOS SDK: version 16.4 is older than the required 17.0" in whats
    assert "iOS Simulator SDK: version 16.4 is older than the required 17.0" in whats
    assert any(w.startswith("metal:") for w in whats)
    assert any("downloadComponent MetalToolchain" in p.fix for p in report.problems)


def test_host_checks_the_pinned_wheel(bindir):
    _common_tools(bindir)
    _tool(bindir, "c++", 'echo "c++ (Debian 12.2.0-14) 12.2.0"')
    python = _fake_python(bindir, executorch="1.4.0")
    report = preflight("host", python=python, wheel="executorch==1.5.1", env={"PATH": str(bindir)})
    assert [p.what for p in report.problems] == [
        "Python package executorch is 1.4.0, the lock pins 1.5.1"
    ]


def test_host_preflight_passes_on_this_machine():
    import os

    from rne_tools.binaries.executor import build_env

    report = preflight("host", python=sys.executable, wheel="executorch==1.5.1",
                       env=build_env(sys.executable, os.environ))
    assert report.problems == [], report.message()
    assert report.versions["executorch (wheel)"].startswith("1.5.1")


def test_stable_interpreter_names_the_environment_through_its_real_location(tmp_path: Path):
    # A clone's .venv is a link to the machine-wide environment: the interpreter the builds get
    # must be named through the link's target, the same path in every clone.
    real_env = Path(sys.prefix).resolve()
    link = tmp_path / "clone" / ".venv"
    link.parent.mkdir()
    link.symlink_to(real_env, target_is_directory=True)
    code = "from rne_tools.binaries.executor import stable_interpreter; print(stable_interpreter())"
    out = subprocess.run([str(link / "bin" / "python"), "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")}, check=True)
    named = Path(out.stdout.strip())
    assert named.parent == real_env / "bin", out.stdout
    assert str(link) not in out.stdout
    torch_dir = subprocess.run([str(named), "-c", "import torch, os; print(os.path.dirname(torch.__file__))"],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert Path(torch_dir).is_relative_to(real_env), torch_dir

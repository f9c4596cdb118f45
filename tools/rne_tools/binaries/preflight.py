"""Preflight: check every tool a platform build needs before any work starts.

All checks run, and a single :class:`PreflightError` lists every problem with how to fix it,
so a maintainer fixes their machine in one pass instead of one failed build per tool. The
versions found are returned and recorded in the manifest.

Checks probe real executables through the ``PATH`` and variables of the ``env`` they are given
(the process environment by default), which is also how the tests exercise them.
"""

from __future__ import annotations

import json
import os
import platform as _platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rne_tools.binaries.errors import PreflightError

MIN_CMAKE = (3, 29)  # the ExecuTorch tree; the host project (wheel's CMake config) needs 3.28
MIN_CMAKE_HOST = (3, 28)
MIN_XCODE = (15, 0)
MIN_IOS_SDK = (17, 0)  # MLX needs an iOS 17 deployment target
MIN_NDK = (27, 0)
MIN_GLSLC = (2023, 1)  # oldest shaderc release that compiles the Vulkan shaders
PYTHON_MODULES = ("yaml", "torchgen")  # ExecuTorch's build-time code generators import these


@dataclass(frozen=True)
class Problem:
    what: str
    fix: str


@dataclass
class PreflightReport:
    """Outcome of a preflight: tool versions found and problems (empty when all is well)."""

    platform: str
    versions: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def message(self) -> str:
        lines = [
            f"cannot build --platform {self.platform}: {len(self.problems)} requirement(s) "
            "missing or unusable:"
        ]
        for p in self.problems:
            lines.append(f"  - {p.what}\n      fix: {p.fix}")
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        if self.problems:
            raise PreflightError(self.message())


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(str(x) for x in v)


class _Prober:
    def __init__(self, env: Mapping[str, str], report: PreflightReport) -> None:
        self.env = dict(env)
        self.report = report

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.env.get("PATH", ""))

    def output(self, argv: list[str]) -> str | None:
        try:
            result = subprocess.run(
                argv, env=self.env, capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if result.returncode != 0:
            return None
        return result.stdout + result.stderr

    def fail(self, what: str, fix: str) -> None:
        self.report.problems.append(Problem(what, fix))

    def tool(
        self,
        name: str,
        version_args: list[str],
        pattern: str,
        minimum: tuple[int, ...] | None,
        fix: str,
        label: str | None = None,
        executable: str | None = None,
    ) -> None:
        """Find ``name`` (or run ``executable``), read its version, compare with ``minimum``."""
        label = label or name
        path = executable or self.which(name)
        if path is None or not Path(path).exists():
            self.fail(f"{label}: not found" + ("" if executable else " on PATH"), fix)
            return
        out = self.output([path, *version_args])
        m = re.search(pattern, out or "")
        if m is None:
            self.fail(f"{label}: {path} did not report a version (`{' '.join(version_args)}`)", fix)
            return
        version = m.group(1)
        self.report.versions[label] = version
        if minimum is not None and _version_tuple(version)[: len(minimum)] < minimum:
            self.fail(f"{label}: version {version} is older than the required {_fmt(minimum)}", fix)


def _check_python(p: _Prober, python: str, modules: tuple[str, ...], wheel: str | None) -> None:
    script = (
        "import importlib.util, importlib.metadata, json, sys\n"
        "mods = sys.argv[1:]\n"
        "missing = [m for m in mods if importlib.util.find_spec(m) is None]\n"
        "try:\n    et = importlib.metadata.version('executorch')\n"
        "except importlib.metadata.PackageNotFoundError:\n    et = None\n"
        "print(json.dumps({'missing': missing, 'executorch': et}))\n"
    )
    out = p.output([python, "-c", script, *modules])
    if out is None:
        p.fail(
            f"Python: {python} does not run",
            "create the virtual environment with `bash scripts/setup.sh` and run this tool with "
            ".venv/bin/python",
        )
        return
    info = json.loads(out.strip().splitlines()[-1])
    if info["missing"]:
        p.fail(
            f"Python modules missing from {python}: {', '.join(info['missing'])}",
            "install the pinned tooling requirements: `bash scripts/setup.sh` "
            "(or `.venv/bin/pip install -r tools/requirements.txt -c tools/constraints.txt`)",
        )
    if wheel is not None:
        want = wheel.split("==", 1)[1]
        if info["executorch"] is None:
            p.fail(f"Python package executorch is not installed in {python}", f"pip install {wheel}")
        elif info["executorch"].split("+")[0] != want:
            p.fail(
                f"Python package executorch is {info['executorch']}, the lock pins {want}",
                f"pip install {wheel} (the host build links the wheel's C++ SDK)",
            )
        else:
            p.report.versions["executorch (wheel)"] = info["executorch"]


def _check_common(p: _Prober, minimum_cmake: tuple[int, ...]) -> None:
    p.tool(
        "git", ["--version"], r"git version (\d+\.\d+(?:\.\d+)?)", None,
        "install git (Debian: `apt-get install git`; macOS: `xcode-select --install`)",
    )
    p.tool(
        "cmake", ["--version"], r"cmake version (\d+\.\d+(?:\.\d+)?)", minimum_cmake,
        f"install CMake >= {_fmt(minimum_cmake)}: `.venv/bin/pip install cmake` gives a current "
        "one in the virtual environment (run this tool with .venv/bin/python so it is on PATH)",
    )


def _check_ninja(p: _Prober) -> None:
    p.tool(
        "ninja", ["--version"], r"(\d+\.\d+(?:\.\d+)?)", None,
        "install Ninja: `.venv/bin/pip install ninja` (or `apt-get install ninja-build`, "
        "`brew install ninja`)",
    )


def _check_ios(p: _Prober, system: str) -> None:
    if system != "Darwin":
        p.fail(
            f"iOS builds need macOS with Xcode; this host is {system}",
            "run `python tools/build_binaries.py --platform ios` on a Mac with Xcode installed",
        )
        return
    xcode_fix = (
        f"install Xcode >= {_fmt(MIN_XCODE)} from the App Store, then "
        "`sudo xcode-select -s /Applications/Xcode.app` and `xcodebuild -runFirstLaunch`"
    )
    p.tool("xcodebuild", ["-version"], r"Xcode (\d+\.\d+(?:\.\d+)?)", MIN_XCODE, xcode_fix)
    for sdk, label in (("iphoneos", "iOS SDK"), ("iphonesimulator", "iOS Simulator SDK")):
        p.tool(
            "xcrun", ["--sdk", sdk, "--show-sdk-version"], r"(\d+\.\d+(?:\.\d+)?)",
            MIN_IOS_SDK,
            f"install the {label} >= {_fmt(MIN_IOS_SDK)}: Xcode > Settings > Components "
            "(or `xcodebuild -downloadPlatform iOS`)",
            label=label,
        )
    p.tool(
        "xcrun", ["--sdk", "iphoneos", "metal", "--version"], r"metal version (\S+)", None,
        "install the Metal toolchain (MLX compiles its metallib with it): "
        "`xcodebuild -downloadComponent MetalToolchain`",
        label="metal",
    )
    for tool in ("libtool", "lipo"):
        if p.which("xcrun") is None or p.output(["xcrun", "--sdk", "iphoneos", "--find", tool]) is None:
            p.fail(f"{tool}: `xcrun --sdk iphoneos --find {tool}` found nothing", xcode_fix)
    p.tool(
        "make", ["--version"], r"Make (\d+\.\d+(?:\.\d+)?)", None,
        "install the Xcode command line tools: `xcode-select --install` (MLX's sub-build uses "
        "Unix Makefiles under the Xcode generator: third-party/patches/ios/0002)",
    )


# A compute shader using the extension 14 of ExecuTorch's Vulkan shaders need; the NDK's glslc
# and Debian's (glslang 11.13) reject it.
_DOT_PRODUCT_PROBE = """#version 450
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { int v; } o;
void main() { o.v = dotPacked4x8EXT(0x01020304, 0x01010101); }
"""
_VULKAN_SDK_FIX = (
    "install the LunarG Vulkan SDK (https://vulkan.lunarg.com/sdk/home) and "
    "`export VULKAN_SDK=<sdk>/<version>/<x86_64|macOS>`; the NDK's glslc cannot compile "
    "ExecuTorch's Vulkan shaders (no GL_EXT_integer_dot_product)"
)


def glslc_accepts_integer_dot_product(glslc: str) -> bool:
    """Whether ``glslc`` compiles a shader that needs ``GL_EXT_integer_dot_product``."""
    with tempfile.TemporaryDirectory() as tmp:
        shader = Path(tmp) / "probe.comp"
        shader.write_text(_DOT_PRODUCT_PROBE)
        try:
            result = subprocess.run([glslc, "--target-env=vulkan1.1", str(shader), "-o",
                                     str(Path(tmp) / "probe.spv")], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return result.returncode == 0


def _check_vulkan_sdk_glslc(p: _Prober) -> None:
    """The glslc the plan passes to ExecuTorch (-DGLSLC_PATH=$VULKAN_SDK/bin/glslc)."""
    sdk = p.env.get("VULKAN_SDK")
    if not sdk:
        p.fail("Vulkan SDK: VULKAN_SDK is not set", _VULKAN_SDK_FIX)
        return
    glslc = Path(sdk) / "bin" / "glslc"
    p.tool("glslc", ["--version"], r"shaderc v(\d+\.\d+)", MIN_GLSLC, _VULKAN_SDK_FIX,
           label="glslc (Vulkan SDK)", executable=str(glslc))
    if glslc.exists() and not glslc_accepts_integer_dot_product(str(glslc)):
        p.fail(f"glslc (Vulkan SDK): {glslc} rejects GL_EXT_integer_dot_product", _VULKAN_SDK_FIX)


def _check_android(p: _Prober, system: str) -> None:
    ndk_fix = (
        f"install NDK r{MIN_NDK[0]} or newer (Android Studio > SDK Manager > SDK Tools > "
        f"NDK (Side by side), or `sdkmanager \"ndk;27.2.12479018\"`) and "
        "`export ANDROID_NDK=$ANDROID_HOME/ndk/<version>`"
    )
    ndk = p.env.get("ANDROID_NDK")
    if not ndk:
        p.fail("Android NDK: ANDROID_NDK is not set", ndk_fix)
    elif not (Path(ndk) / "build" / "cmake" / "android.toolchain.cmake").is_file():
        p.fail(f"Android NDK: ANDROID_NDK={ndk} has no build/cmake/android.toolchain.cmake", ndk_fix)
    else:
        props = Path(ndk) / "source.properties"
        m = re.search(r"Pkg\.Revision\s*=\s*(\d+\.\d+(?:\.\d+)?)", props.read_text()) if props.is_file() else None
        if m is None:
            p.fail(f"Android NDK: cannot read Pkg.Revision from {props}", ndk_fix)
        else:
            p.report.versions["Android NDK"] = m.group(1)
            if _version_tuple(m.group(1))[:2] < MIN_NDK:
                p.fail(f"Android NDK: version {m.group(1)} is older than r{MIN_NDK[0]}", ndk_fix)
    _check_vulkan_sdk_glslc(p)
    # ExecuTorch's Android JNI library would download fbjni from Maven at configure time; the
    # plan turns that library off, so the build needs no network beyond the source fetch.


# What --platform linux needs beyond CMake/Ninja: ccache (cached rebuilds), and headers the
# Vulkan loader and MLX's CPU backend build against. (lavapipe, the CPU Vulkan device, is only
# needed to run Vulkan programs, not to build them.)
_LINUX_HEADERS = (
    ("vulkan/vulkan.h", "libvulkan-dev"),
    ("cblas.h", "libopenblas-dev"),
    ("lapacke.h", "liblapacke-dev"),
)


def _check_linux(p: _Prober, system: str) -> None:
    if system != "Linux":
        p.fail(f"--platform linux builds on Linux, this is {system}",
               "use --platform host (the wheel's runtime) on this machine")
        return
    p.tool("ccache", ["--version"], r"ccache version (\d+\.\d+(?:\.\d+)?)", None,
           "install ccache: `apt-get install ccache`")
    for header, package in _LINUX_HEADERS:
        if not any((Path(d) / header).is_file() for d in ("/usr/include", "/usr/include/x86_64-linux-gnu",
                                                           "/usr/include/aarch64-linux-gnu")):
            p.fail(f"{header}: not found in the system include directories",
                   f"apt-get install {package}")


# What --platform linux-arm64 needs: the Debian cross toolchain, qemu-user to run the tests (and
# GoogleTest's discovery at build time), GoogleTest's source and ccache. One apt-get line fixes all.
_ARM64_NEEDS = (
    ("aarch64-linux-gnu-g++", "crossbuild-essential-arm64"),
    ("qemu-aarch64", "qemu-user"),
    ("ccache", "ccache"),
)
ARM64_SYSROOT = Path("/usr/aarch64-linux-gnu")


def _check_linux_arm64(p: _Prober, system: str, googletest: Path) -> None:
    if system != "Linux":
        p.fail(f"--platform linux-arm64 cross-builds on Linux (Debian's toolchain), this is {system}",
               "run it on a Debian or Ubuntu machine")
        return
    missing = [package for tool, package in _ARM64_NEEDS if p.which(tool) is None]
    if not (ARM64_SYSROOT / "lib" / "ld-linux-aarch64.so.1").is_file():
        missing.append("crossbuild-essential-arm64")
    if not (googletest / "CMakeLists.txt").is_file():
        missing.append("googletest")
    missing = sorted(set(missing))
    if missing:
        p.fail(f"the arm64 cross build needs Debian packages that are not installed: "
               f"{', '.join(missing)}",
               f"apt-get update && apt-get install -y {' '.join(missing)}")
    # Their versions go into the manifest (a missing one is already in the apt-get line).
    if p.which("aarch64-linux-gnu-g++") is None or p.which("qemu-aarch64") is None:
        return
    p.tool("aarch64-linux-gnu-g++", ["--version"], r"(\d+\.\d+(?:\.\d+)?)", None,
           "apt-get install -y crossbuild-essential-arm64", label="aarch64 C++ compiler")
    p.tool("qemu-aarch64", ["--version"], r"version (\d+\.\d+(?:\.\d+)?)", None,
           "apt-get install -y qemu-user", label="qemu-aarch64")


def preflight(
    platform: str,
    *,
    python: str,
    wheel: str | None = None,
    env: Mapping[str, str] | None = None,
    system: str | None = None,
) -> PreflightReport:
    """Check what ``platform`` needs. Never raises; call ``raise_if_failed()`` on the result.

    ``python`` is the interpreter ExecuTorch's build will run; ``wheel`` (``executorch==X``) is
    checked for the host build, which links that wheel's C++ SDK.
    """
    report = PreflightReport(platform)
    p = _Prober(os.environ if env is None else env, report)
    system = system or _platform.system()
    if platform == "host":
        _check_common(p, MIN_CMAKE_HOST)
        _check_ninja(p)
        cxx = p.env.get("CXX") or "c++"
        p.tool(
            cxx, ["--version"], r"(\d+\.\d+(?:\.\d+)?)", None,
            "install a C++17 compiler (Debian: `apt-get install g++`; macOS: "
            "`xcode-select --install`) or point CXX at one",
            label="C++ compiler",
        )
        _check_python(p, python, (), wheel)
    elif platform == "linux":
        _check_common(p, MIN_CMAKE_HOST)
        _check_ninja(p)
        _check_python(p, python, PYTHON_MODULES, None)
        _check_linux(p, system)
    elif platform == "linux-arm64":
        from rne_tools.binaries.platforms import GTEST_SOURCE

        _check_common(p, MIN_CMAKE_HOST)
        _check_ninja(p)
        _check_linux_arm64(p, system, Path(GTEST_SOURCE))
    elif platform == "ios":
        _check_common(p, MIN_CMAKE)
        _check_python(p, python, PYTHON_MODULES, None)
        _check_ios(p, system)
    elif platform == "android":
        _check_common(p, MIN_CMAKE)
        _check_ninja(p)
        _check_python(p, python, PYTHON_MODULES, None)
        _check_android(p, system)
    else:
        raise ValueError(f"unknown platform {platform!r}")
    return report

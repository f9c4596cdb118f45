"""The iOS-only patches (third-party/patches/ios/) on the locked source's real files.

MLX's kernels/CMakeLists.txt is configured here with CMake (Ninja; no Xcode or Metal needed to
generate the commands) for an iOS device, an iOS simulator and macOS, before and after the
patches, and the generated `metal` command lines are read back. Only the iOS build applies
these patches: the linux source build in the cache keeps its tree, plan and key.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rne_tools.binaries import apply_series, build_plan, load_lock, patch_series, platform_series
from rne_tools.binaries.plan import ApplyPatches, Run

BIN = Path(sys.executable).parent  # the venv's cmake and ninja
IOS_PATCHES = ["ios/0001-mlx-metallib-for-the-ios-sdk.patch", "ios/0002-mlx-single-config-sub-build.patch"]
LINUX_PATCHES = ["linux/0001-mlx-cpu-quantized-ops-in-float.patch", "linux/0002-mlx-cpu-sdpa-float-scores.patch",
                 "linux/0003-llm-attention-gqa-split-keys.patch"]
ET_MLX = "backends/mlx"
MLX_METAL = "backends/mlx/third-party/mlx/mlx/backend/metal"
DEPLOYMENT_TARGET = "17.0"

# What MLX's top-level CMakeLists.txt (and ios-cmake, through the toolchain) define before it
# reads kernels/: the platform, its sysroot and deployment target; JIT kernels as ExecuTorch
# builds them; Metal version 0, which MLX sets where CMAKE_SYSTEM_NAME is not Darwin.
HARNESS = """cmake_minimum_required(VERSION 3.24)
project(mlx_metal_kernels NONE)
set(CMAKE_SYSTEM_NAME ${SYSTEM_NAME})
set(CMAKE_OSX_SYSROOT ${SYSROOT})
set(CMAKE_OSX_DEPLOYMENT_TARGET ${DEPLOYMENT_TARGET})
set(MLX_METAL_JIT ON)
set(MLX_METAL_VERSION 0)
set(MLX_METAL_PATH ${CMAKE_CURRENT_BINARY_DIR}/kernels/)
add_custom_target(mlx)
add_subdirectory(${KERNELS_DIR} kernels)
"""


def _plan(platform: str):
    return build_plan(platform, lock=load_lock(),
                      patches=[p.name for p in platform_series(platform)], jobs=2)


def test_only_the_ios_build_applies_the_ios_patches():
    common = [p.name for p in patch_series()]
    assert [p.name for p in platform_series("ios")] == common + IOS_PATCHES
    assert [p.name for p in platform_series("linux")] == common + LINUX_PATCHES
    for platform in ("linux", "android", "host"):
        assert "patches/ios/" not in _plan(platform).dumps()
    for platform in ("android", "host"):
        assert [p.name for p in platform_series(platform)] == common
    for platform in ("ios", "android", "host"):
        assert "patches/linux/" not in _plan(platform).dumps()

    steps = _plan("ios").steps
    apply = next(i for i, s in enumerate(steps) if isinstance(s, ApplyPatches))
    first_configure = next(i for i, s in enumerate(steps) if isinstance(s, Run) and "-S" in s.argv)
    assert apply < first_configure
    assert steps[apply].patches == tuple(f"$REPO/third-party/patches/{n}" for n in common + IOS_PATCHES)


def _ios_patched_tree(tmp_path: Path, source: Path) -> Path:
    """A copy of the files the iOS patches touch, with the iOS series applied by our patch
    mechanism and then MLX's patch list applied by ExecuTorch's own apply.sh, as MLX's
    ExternalProject does before building."""
    tree = tmp_path / "executorch"
    (tree / ET_MLX).mkdir(parents=True)
    shutil.copy(source / ET_MLX / "CMakeLists.txt", tree / ET_MLX / "CMakeLists.txt")
    shutil.copytree(source / ET_MLX / "patches", tree / ET_MLX / "patches")
    shutil.copytree(source / MLX_METAL, tree / MLX_METAL)
    # The cached tree may be the linux build's: take its linux-only patches back out first.
    for patch in reversed([p for p in platform_series("linux") if p.name in LINUX_PATCHES]):
        if subprocess.run(["git", "apply", "-R", "--check", str(patch.path)], cwd=tree,
                          capture_output=True).returncode == 0:
            subprocess.run(["git", "apply", "-R", str(patch.path)], cwd=tree, check=True)
    series = [p for p in platform_series("ios") if p.name in IOS_PATCHES]
    assert apply_series(tree, series) == IOS_PATCHES

    text = (tree / ET_MLX / "CMakeLists.txt").read_text()
    listed = re.search(r"set\(_mlx_patches\s+(.*?)\)", text, re.S).group(1).split()
    mlx_patches = [p.replace("${CMAKE_CURRENT_SOURCE_DIR}", str(tree / ET_MLX)) for p in listed]
    assert mlx_patches[-1].endswith("/mlx_metallib_ios_sdk.patch")
    mlx_root = tree / MLX_METAL.removesuffix("/mlx/backend/metal")
    subprocess.run(["bash", str(tree / ET_MLX / "patches" / "apply.sh"), str(mlx_root), *mlx_patches],
                   check=True, capture_output=True, text=True)
    return tree


def _metal_commands(tmp_path: Path, kernels: Path, system: str, sysroot: str, target: str) -> list[str]:
    """The commands CMake generates to build mlx.metallib from ``kernels``/CMakeLists.txt
    (their directories as ``<kernels>`` and ``<harness>``, so two trees compare equal)."""
    harness = tmp_path / f"harness-{len(list(tmp_path.glob('harness-*')))}"
    harness.mkdir()
    (harness / "CMakeLists.txt").write_text(HARNESS)
    build = harness / "build"
    subprocess.run(
        [str(BIN / "cmake"), "-S", str(harness), "-B", str(build), "-G", "Ninja",
         f"-DCMAKE_MAKE_PROGRAM={BIN / 'ninja'}", f"-DSYSTEM_NAME={system}",
         f"-DSYSROOT={sysroot}", f"-DDEPLOYMENT_TARGET={target}", f"-DKERNELS_DIR={kernels}"],
        check=True, capture_output=True, text=True)
    out = subprocess.run([str(BIN / "ninja"), "-C", str(build), "-t", "commands", "mlx-metallib"],
                         check=True, capture_output=True, text=True).stdout
    commands = [line.split(" && ", 1)[-1].replace(str(kernels), "<kernels>").replace(str(harness), "<harness>")
                for line in out.splitlines() if " metal " in line]
    assert len(commands) >= 2, out  # at least one kernel compiled, and the link
    return commands


@pytest.mark.executorch_source
def test_ios_metallib_is_built_with_the_ios_sdk(tmp_path, executorch_source_dir):
    locked = tmp_path / "locked" / "kernels"
    shutil.copytree(executorch_source_dir / MLX_METAL / "kernels", locked)
    patched = _ios_patched_tree(tmp_path, executorch_source_dir) / MLX_METAL / "kernels"

    # The locked source builds a macOS metallib even for an iOS device: the bug.
    before = _metal_commands(tmp_path, locked, "iOS", "iphoneos", DEPLOYMENT_TARGET)
    assert all(c.startswith("xcrun -sdk macosx metal") for c in before)
    assert all(f"-mmacosx-version-min={DEPLOYMENT_TARGET}" in c for c in before)

    device = _metal_commands(tmp_path, patched, "iOS", "iphoneos", DEPLOYMENT_TARGET)
    assert len(device) == len(before)
    assert all(c.startswith("xcrun -sdk iphoneos metal") for c in device)
    assert all(f"-mios-version-min={DEPLOYMENT_TARGET}" in c and "macosx" not in c for c in device)
    assert re.search(r"\.air -o \S+/mlx\.metallib$", device[-1])  # the link: the .air files

    simulator = _metal_commands(tmp_path, patched, "iOS",
                                "/Xcode.app/Platforms/iPhoneSimulator.platform/SDKs/iPhoneSimulator.sdk",
                                DEPLOYMENT_TARGET)
    assert all(c.startswith("xcrun -sdk iphonesimulator metal") for c in simulator)
    assert all(f"-mios-simulator-version-min={DEPLOYMENT_TARGET}" in c for c in simulator)

    # macOS builds are exactly as before.
    assert (_metal_commands(tmp_path, patched, "Darwin", "macosx", "14.0")
            == _metal_commands(tmp_path, locked, "Darwin", "macosx", "14.0"))


@pytest.mark.executorch_source
def test_mlx_sub_build_is_single_config_under_xcode(tmp_path, executorch_source_dir):
    """Under Xcode (multi-config) MLX is built with Unix Makefiles, so libmlx.a lands at
    ${_mlx_binary_dir}/libmlx.a: where the imported target, install() and our iOS merge step
    ($BUILD/ios-device/backends/mlx/mlx/libmlx.a) read it."""
    locked = (executorch_source_dir / ET_MLX / "CMakeLists.txt").read_text()
    text = (_ios_patched_tree(tmp_path, executorch_source_dir) / ET_MLX / "CMakeLists.txt").read_text()
    assert "CMAKE_GENERATOR" not in _external_project_call(locked)  # inherits Xcode
    assert re.search(r"get_property\(_mlx_multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG\)\s*"
                     r"if\(_mlx_multi_config\)\s*"
                     r'set\(_mlx_generator CMAKE_GENERATOR "Unix Makefiles"\)\s*endif\(\)', text)
    assert _external_project_call(text).split()[:2] == ["mlx_external", "${_mlx_generator}"]
    assert "set(_mlx_static_lib ${_mlx_binary_dir}/libmlx.a)" in text
    assert "install(FILES ${_mlx_static_lib} DESTINATION ${CMAKE_INSTALL_LIBDIR})" in text

    merge = next(s for s in _plan("ios").steps
                 if isinstance(s, Run) and "libtool" in s.argv and "ios-device/merged" in " ".join(s.argv))
    assert "$BUILD/ios-device/backends/mlx/mlx/libmlx.a" in merge.inputs  # _mlx_binary_dir/libmlx.a


def _external_project_call(cmake_text: str) -> str:
    return re.search(r"ExternalProject_Add\(\s*(mlx_external.*?)\n\)", cmake_text, re.S).group(1)

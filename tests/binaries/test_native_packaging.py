"""What the iOS pod and the Android library will compile and link, read from the podspec,
android/CMakeLists.txt and android/build.gradle (no Xcode or NDK here), checked against the
package's tree and, where the source build's install exists, ExecuTorch's real headers.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from rne_tools.binaries.lock import load_lock
from rne_tools.binaries.platforms import linux_paths
from rne_tools.binaries.preflight import glslc_accepts_integer_dot_product
from rne_tools.paths import PACKAGE_DIR, cache_root

PODSPEC_TEXT = (PACKAGE_DIR / "react-native-executorch.podspec").read_text()
PODSPEC = "\n".join(line.split("#")[0] for line in PODSPEC_TEXT.splitlines())  # code, no comments
ANDROID_CMAKE = (PACKAGE_DIR / "android" / "CMakeLists.txt").read_text()
GRADLE = (PACKAGE_DIR / "android" / "build.gradle").read_text()
C10_DEFINE = "C10_USING_CUSTOM_GENERATED_MACROS"
C10_SUBDIR = "executorch/runtime/core/portable_type/c10"


def _ruby_list(name: str) -> list[str]:
    """The string items of ``s.<name> = [...]`` in the podspec."""
    m = re.search(rf"s\.{name}\s*=\s*\[(.*?)\]", PODSPEC, re.S)
    assert m, f"s.{name} not found in the podspec"
    return re.findall(r'"([^"]+)"', m.group(1))


def _expand_braces(pattern: str) -> list[str]:
    m = re.search(r"\{([^}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",")
            for x in _expand_braces(pattern[:m.start()] + alt + pattern[m.end():])]


def _glob(patterns: list[str]) -> set[Path]:
    return {p for pat in patterns for alt in _expand_braces(pat) for p in PACKAGE_DIR.glob(alt)
            if p.is_file()}


def _pod_sources() -> set[Path]:
    return _glob(_ruby_list("source_files")) - _glob(_ruby_list("exclude_files"))


def _xcconfig(name: str) -> str:
    # A string literal, or a list of them joined (HEADER_SEARCH_PATHS).
    m = re.search(rf'"{re.escape(name)}"\s*=>\s*(\[.*?\]|(?:"(?:[^"\\]|\\.)*"\s*)+)', PODSPEC, re.S)
    assert m, f"{name} not in the podspec's xcconfig"
    return m.group(1)


def test_pod_compiles_the_app_code_and_no_tests_or_host_tools() -> None:
    sources = {p.relative_to(PACKAGE_DIR).as_posix() for p in _pod_sources()}
    leaked = sorted(s for s in sources if re.search(r"/(tests|tools|host|node)/", s))
    assert leaked == [], leaked
    assert not any("gtest" in (PACKAGE_DIR / s).read_text(errors="ignore") for s in sources
                   if s.endswith(".cpp"))
    cpp = PACKAGE_DIR / "cpp"
    needed = {*cpp.glob("jsi/*.cpp"), *cpp.glob("seam/*.cpp"), *cpp.glob("json/src/*.cpp"),
              *cpp.glob("runner/src/*.cpp"), *cpp.glob("grammar/src/*.cpp"),
              *cpp.glob("tokenizer/src/*.cpp")}
    assert needed and {p.relative_to(PACKAGE_DIR).as_posix() for p in needed} <= sources


def test_pod_force_loads_only_our_archive() -> None:
    flags = _xcconfig("OTHER_LDFLAGS")
    assert "-all_load" not in PODSPEC
    assert "-force_load" in flags and "react-native-executorch/libexecutorch.a" in flags


def test_pod_sets_executorchs_c10_define_and_include_path() -> None:
    assert C10_DEFINE in _xcconfig("GCC_PREPROCESSOR_DEFINITIONS")
    assert f"Headers/{C10_SUBDIR}" in _xcconfig("HEADER_SEARCH_PATHS")


def test_android_imported_library_carries_the_c10_define_and_include_path() -> None:
    props = ANDROID_CMAKE[ANDROID_CMAKE.index("set_target_properties(executorch"):]
    props = props[:props.index(")\n")]
    assert f'INTERFACE_COMPILE_DEFINITIONS "{C10_DEFINE}"' in props
    assert f"${{RNE_EXECUTORCH_INCLUDE}}/{C10_SUBDIR}" in props
    assert 'IMPORTED_SONAME "libexecutorch.so"' in props


def test_android_packages_libexecutorch_once() -> None:
    """The IMPORTED library is packaged by the Android Gradle plugin; a jniLibs dir holding it
    too is a duplicate-file error."""
    code = "\n".join(line.split("//")[0] for line in GRADLE.splitlines())
    assert "jniLibs" not in code
    # CMake gets the fetched binaries' directory of each ABI (scripts/fetch-binaries.js).
    assert "-DRNE_THIRD_PARTY_DIR_${abi}=" in GRADLE


def _installed_headers() -> Path:
    paths = linux_paths(load_lock())
    include = Path(paths["et_install"].replace("$CACHE", str(cache_root()))) / "include"
    assert (include / "executorch/extension/module/module.h").is_file(), (
        f"{include} has no ExecuTorch headers: run tools/build_binaries.py --platform linux")
    return include


def _compile(include: Path, defines: list[str], c10: bool) -> subprocess.CompletedProcess[str]:
    """Our runner's Module user, compiled as the glue would against ExecuTorch's headers."""
    argv = ["c++", "-std=c++20", "-fsyntax-only", f"-I{include}",
            f"-I{PACKAGE_DIR / 'cpp/base/include'}", f"-I{PACKAGE_DIR / 'cpp/runner/include'}",
            *(f"-D{d}" for d in defines),
            str(PACKAGE_DIR / "cpp/runner/src/model_session.cpp")]
    if c10:
        argv.insert(3, f"-I{include / C10_SUBDIR}")
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)


@pytest.mark.executorch_source
def test_the_glue_flags_compile_against_executorchs_headers() -> None:
    """The define and include path the podspec and android CMake set are what ExecuTorch's
    headers need: with them our runner compiles; without the define it does not."""
    include = _installed_headers()
    ok = _compile(include, [C10_DEFINE], c10=True)
    assert ok.returncode == 0, ok.stderr[-3000:]
    without = _compile(include, [], c10=True)
    assert without.returncode != 0 and "macros/cmake_macros.h" in without.stderr
    no_c10 = _compile(include, [C10_DEFINE], c10=False)
    assert no_c10.returncode != 0 and "No such file" in no_c10.stderr


@pytest.mark.executorch_source
def test_the_glslc_probe_accepts_a_shaderc_that_compiles_executorchs_shaders() -> None:
    """The Android preflight's probe, on a real glslc: the one built from the locked shaderc
    (which compiles every Vulkan shader of the linux build) passes; a stand-in that fails to
    compile does not."""
    glslc = Path(linux_paths(load_lock())["glslc"].replace("$CACHE", str(cache_root())))
    assert glslc.is_file(), f"{glslc} is missing: run tools/build_binaries.py --platform linux"
    assert glslc_accepts_integer_dot_product(str(glslc))
    assert not glslc_accepts_integer_dot_product("/bin/false")

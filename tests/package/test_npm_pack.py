"""The npm tarball as an app receives it: `npm pack` (which runs `npm run build`, the published
lib/), then its file list against what the podspec, Gradle, CMake, the config plugin and the fetch
script reference, run from the unpacked tarball where they can run here, and a size budget."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from rne_tools.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "packages" / "react-native-executorch"
# The packed (gzipped) tarball; 0.42 MB when set (lib/, src/, the C++ the apps compile).
SIZE_BUDGET = 600_000
# The C++ the native builds compile beyond android/CMakeLists.txt's globs, and the include roots
# of the tokenizer and JSON projects it adds (the others are read from the podspec and that file).
SUBPROJECT_INCLUDE_ROOTS = ("cpp/json/include", "cpp/tokenizer/include")
NATIVE_SOURCES = ("cpp/tokenizer/src/*.cpp", "cpp/json/src/*.cpp", "android/src/main/cpp/*.cpp",
                  "ios/*.mm")
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
FORBIDDEN = re.compile(r"(^|/)(__tests__|tests?|fixtures|fuzz|node_modules|generated)/|\.test\.|"
                       r"\.tsbuildinfo$|(^|/)build/|^plugin/src/|\.tgz$")
# The config plugin's compiled JavaScript: the one build output the package ships (app.plugin.js).
PLUGIN_BUILD = "plugin/build/"


def _git_files() -> set[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=PACKAGE, capture_output=True, text=True, check=True).stdout
    return {p for p in out.split("\0") if p}


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`npm pack` of the package (prepack: `npm run build` and the copied pins), unpacked."""
    out = tmp_path_factory.mktemp("pack")
    result = subprocess.run(["npm", "pack", "--json", "--pack-destination", str(out)], cwd=PACKAGE,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads(result.stdout[result.stdout.index("["):])[0]
    with tarfile.open(out / info["filename"]) as tar:
        tar.extractall(out / "x", filter="data")
    root = out / "x" / "package"
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert files == {f["path"] for f in info["files"]}
    return {"info": info, "root": root, "files": files, "tarball": out / info["filename"]}


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A podspec (Ruby File.fnmatch with FNM_EXTGLOB) glob as a regex on package paths."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "{":
            j = pattern.index("}", i)
            out, i = out + "(?:" + "|".join(map(re.escape, pattern[i + 1:j].split(","))) + ")", j + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + "$")


def _podspec_list(text: str, key: str) -> list[str]:
    m = re.search(rf"s\.{key}\s*=\s*\[(.*?)\]", text, re.S)
    assert m, f"podspec has no s.{key} list"
    return re.findall(r'"([^"]+)"', m.group(1))


def test_build_output_is_what_apps_import(packed):
    pkg = json.loads((packed["root"] / "package.json").read_text())
    for key in ("main", "types", "react-native"):
        assert pkg[key] in packed["files"], f"package.json {key} {pkg[key]} is not in the tarball"
    # Every relative import of lib/ resolves inside the tarball.
    for rel in sorted(f for f in packed["files"] if f.startswith("lib/") and f.endswith(".js")):
        text = (packed["root"] / rel).read_text()
        for spec in re.findall(r"""(?:require\(|from\s+)['"](\.[^'"]+)['"]""", text):
            target = os.path.normpath(os.path.join(os.path.dirname(rel), spec))
            assert {f"{target}.js", f"{target}/index.js", target} & packed["files"], \
                f"{rel} imports {spec}, which is not in the tarball"


def test_no_tests_fixtures_or_build_outputs_and_within_budget(packed):
    bad = sorted(f for f in packed["files"] if FORBIDDEN.search(f) and not f.startswith(PLUGIN_BUILD))
    assert bad == []
    size = packed["info"]["size"]
    print(f"\ntarball: {size} bytes packed, {packed['info']['unpackedSize']} unpacked, "
          f"{packed['info']['entryCount']} files")
    assert size <= SIZE_BUDGET, f"the tarball is {size} bytes, over its budget of {SIZE_BUDGET}"


def test_podspec_sources_are_all_inside(packed):
    text = (packed["root"] / "react-native-executorch.podspec").read_text()
    sources = [_glob_regex(p) for p in _podspec_list(text, "source_files")]
    excluded = [_glob_regex(p) for p in _podspec_list(text, "exclude_files")]
    for pattern in sources:
        assert any(pattern.match(f) for f in packed["files"]), f"no file of the tarball matches {pattern.pattern}"
    wanted = {f for f in _git_files()
              if any(p.match(f) for p in sources) and not any(p.match(f) for p in excluded)}
    assert sorted(wanted - packed["files"]) == []
    # What it runs at `pod install`.
    for script in re.findall(r'File\.join\(__dir__, "([^"]+)", "([^"]+)"(?:, "([^"]+)")?\)', text):
        rel = "/".join(p for p in script if p)
        if "." not in rel.rsplit("/", 1)[-1]:  # a directory it writes, not a file it runs
            continue
        assert rel in packed["files"], f"the podspec runs {rel}, which is not in the tarball"


def test_android_build_references_are_inside(packed):
    gradle = (packed["root"] / "android" / "build.gradle").read_text()
    for rel in re.findall(r'file\("\$\{projectDir\}/\.\./([^"]+)"\)', gradle):
        if rel.startswith(".."):  # this repository's staging, outside any package
            continue
        assert any(f == rel or f.startswith(rel + "/") for f in packed["files"]), \
            f"build.gradle reads {rel}, which is not in the tarball"
    assert re.search(r'path "CMakeLists.txt"', gradle) and "android/CMakeLists.txt" in packed["files"]
    cmake = (packed["root"] / "android" / "CMakeLists.txt").read_text()
    for rel in re.findall(r'"\$\{RNE_CPP_DIR\}/([^"$]+)"', cmake):
        rel = f"cpp/{rel}"
        if "*" in rel:
            assert any(_glob_regex(rel).match(f) for f in packed["files"]), f"CMake globs {rel}: empty"
        else:
            assert any(f == rel or f.startswith(rel + "/") for f in packed["files"]), \
                f"android/CMakeLists.txt uses {rel}, which is not in the tarball"


def test_every_include_of_the_native_sources_resolves_inside(packed):
    """The C++ the apps compile (podspec sources, Android CMake globs, the tokenizer and JSON
    projects): every header it includes that this repository has is in the tarball too."""
    root, files, git = packed["root"], packed["files"], _git_files()
    cmake = (root / "android" / "CMakeLists.txt").read_text()
    podspec = (root / "react-native-executorch.podspec").read_text()
    include_roots = {*SUBPROJECT_INCLUDE_ROOTS,
                     *(f"cpp/{d}" for d in re.findall(r'^\s*"\$\{RNE_CPP_DIR\}/([^"*$]+)"\)?$', cmake, re.M)),
                     *re.findall(r'\$\(PODS_TARGET_SRCROOT\)/([^"\\]+)', podspec)}
    assert {"cpp/runner/include", "cpp/seam", "cpp/jsi"} <= include_roots
    patterns = [f"cpp/{p}" for p in re.findall(r'"\$\{RNE_CPP_DIR\}/([^"$]+\*[^"$]*)"', cmake)]
    patterns += NATIVE_SOURCES
    todo = sorted(f for f in files if any(_glob_regex(p).match(f) for p in patterns))
    assert len(todo) > 30
    seen, missing = set(todo), []
    while todo:
        rel = todo.pop()
        for inc in _INCLUDE.findall((root / rel).read_text(errors="replace")):
            candidates = [os.path.normpath(os.path.join(os.path.dirname(rel), inc)),
                          *(f"{r}/{inc}" for r in sorted(include_roots))]
            if not any(c in git for c in candidates):
                continue  # a system, ExecuTorch or React Native header
            found = next((c for c in candidates if c in files), None)
            if found is None:
                missing.append(f"{rel} includes {inc}")
            elif found not in seen:
                seen.add(found)
                todo.append(found)
    assert missing == []


def test_tokenizer_project_configures_from_the_tarball(packed, tmp_path):
    """android/CMakeLists.txt adds cpp/tokenizer (and with it cpp/json): configured as it is packed."""
    cmake = shutil.which("cmake", path=str(REPO_ROOT / ".venv" / "bin")) or "cmake"
    result = subprocess.run(
        [cmake, "-S", str(packed["root"] / "cpp" / "tokenizer"), "-B", str(tmp_path / "b"),
         "-DRNE_TOKENIZER_BUILD_TOOLS=OFF", "-DRNE_TOKENIZER_BUILD_TESTS=OFF"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_stb_image_pin_is_packed_and_read(packed, tmp_path):
    """cpp/cmake/stb_image.cmake, as the podspec runs it, finds the pin inside the package."""
    lock = json.loads((packed["root"] / "third-party" / "stb_image.lock.json").read_text())
    cmake = shutil.which("cmake", path=str(REPO_ROOT / ".venv" / "bin")) or "cmake"
    result = subprocess.run(
        [cmake, f"-DRNE_STB_WORK_DIR={tmp_path / 'stb'}",
         f"-DRNE_STB_IMAGE_URL=file://{tmp_path / 'absent.h'}",
         "-P", str(packed["root"] / "cpp" / "cmake" / "stb_image.cmake")],
        capture_output=True, text=True, timeout=120)
    # The pin was read (its sha256 is named) and only the download itself failed.
    assert result.returncode != 0
    assert "the pinned stb_image.h) is in neither" not in result.stderr
    assert lock["sha256"] in result.stderr + result.stdout or "absent.h" in result.stderr


def test_fetch_script_and_config_plugin_run_from_the_tarball(packed, tmp_path):
    root = packed["root"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RNE_BINARIES")}
    result = subprocess.run(["node", str(root / "scripts" / "fetch-binaries.js"), "android", "--json"],
                            capture_output=True, text=True, env=env, timeout=60)
    lock = json.loads((root / "binaries.lock.json").read_text())
    assert lock["version"] == json.loads((root / "package.json").read_text())["version"]
    if not lock["artifacts"].get("android"):  # no release yet: the lock says so, naming itself
        assert result.returncode == 1
        assert f"the binaries lock {root / 'binaries.lock.json'}" in result.stderr
        assert "RNE_BINARIES_DIR" in result.stderr
    plugin = subprocess.run(
        ["node", "-e", "const p = require(process.argv[1]); const c = p({name: 'a', slug: 'a'}, "
         "{backends: 'cpu'}); console.log(JSON.stringify(c.ios))", str(root / "app.plugin.js")],
        capture_output=True, text=True, timeout=60,
        env={**env, "NODE_PATH": str(REPO_ROOT / "node_modules")})
    assert plugin.returncode == 0, plugin.stderr
    ios = json.loads(plugin.stdout)
    assert ios["deploymentTarget"] == "17.0"
    assert ios["entitlements"]["com.apple.developer.kernel.increased-memory-limit"] is True

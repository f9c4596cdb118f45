"""stb_image.h for the phone builds: ``cpp/cmake/stb_image.cmake`` downloads the pinned upstream
file (``third-party/stb_image.lock.json``), refuses anything but its exact bytes, and compiles a
copy with the 4:2:2 fix; the Android CMake and the iOS podspec use it and compile ``cpp/media``.

No network: the header is served from 127.0.0.1 and the module's URL override points there.
The right bytes are Debian bookworm's ``libstb-dev`` copy (``scripts/setup.sh`` installs it),
which is the pinned upstream file.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rne_tools.paths import PACKAGE_DIR, REPO_ROOT

MODULE = PACKAGE_DIR / "cpp" / "cmake" / "stb_image.cmake"
LOCK = json.loads((REPO_ROOT / "third-party" / "stb_image.lock.json").read_text())
DEBIAN_HEADER = Path("/usr/include/stb/stb_image.h")  # libstb-dev's fixed location
CMAKE = shutil.which("cmake", path=str(Path(sys.executable).parent)) or shutil.which("cmake")
BUG = b"out[i*2+0] = stbi__div4(input[w-2]*3 + input[w-1] + 2);"
FIX = b"out[i*2+0] = stbi__div4(input[w-1]*3 + input[w-2] + 2);"
# The guards against damaged JPEGs and empty PNG chunks (issue #63): each line after every
# occurrence of the line before it.
GUARDS = [
    (b"            L -= 17;",
     b'            if (n > 256) return stbi__err("bad DHT header","Corrupt JPEG");'),
    (b"   if (j->code_bits < n) stbi__grow_buffer_unsafe(j);", b"   if (j->code_bits < n) return 0;"),
    (b"   if (j->code_bits < 1) stbi__grow_buffer_unsafe(j);", b"   if (j->code_bits < 1) return 0;"),
    (b"s = r & 15; // combined length",
     b'            if (s > j->code_bits) return stbi__err("bad huffman code","Corrupt JPEG");'),
    (b"static int stbi__getn(stbi__context *s, stbi_uc *buffer, int n)\n{", b"   if (n == 0) return 1;"),
]


def _patched(data: bytes) -> bytes:
    """What the module must write: the 4:2:2 fix and every guard."""
    data = data.replace(BUG, FIX)
    for after, guard in GUARDS:
        assert after + b"\n" in data, after
        data = data.replace(after + b"\n", after + b"\n" + guard + b"\n")
    return data


def _pinned_bytes() -> bytes:
    if not DEBIAN_HEADER.is_file():
        pytest.skip(f"{DEBIAN_HEADER} is missing: install libstb-dev (scripts/setup.sh does)")
    data = DEBIAN_HEADER.read_bytes()
    if hashlib.sha256(data).hexdigest() != LOCK["sha256"]:
        pytest.skip(f"{DEBIAN_HEADER} is not the pinned stb_image.h (not bookworm's libstb-dev)")
    return data


@dataclass
class Server:
    """Serves ``/good``, ``/wrong`` (one byte changed), ``/short`` (half the file, announced as
    half), ``/cut`` (announces the whole file, sends half, hangs up); anything else is 404."""

    data: bytes
    url: str = ""
    requests: list[str] = field(default_factory=list)


@pytest.fixture()
def server() -> Iterator[Server]:
    data = _pinned_bytes()
    state = Server(data)
    wrong = bytearray(data)
    wrong[len(wrong) // 2] ^= 0x20
    half = data[: len(data) // 2]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server name)
            state.requests.append(self.path)
            bodies = {"/good": (data, len(data)), "/wrong": (bytes(wrong), len(wrong)),
                      "/short": (half, len(half)), "/cut": (half, len(data))}
            if self.path not in bodies:
                self.send_error(404)
                return
            body, length = bodies[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _env(**extra: str) -> dict[str, str]:
    """No proxy between curl and the local server, and no URL override but the test's."""
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in {"http_proxy", "https_proxy", "all_proxy", "rne_stb_image_url"}}
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1"
    env.update(extra)
    return env


def _script(work: Path, url: str) -> subprocess.CompletedProcess[str]:
    """The iOS podspec's call."""
    if CMAKE is None:
        pytest.skip("cmake is not installed")
    return subprocess.run([CMAKE, f"-DRNE_STB_WORK_DIR={work}", f"-DRNE_STB_IMAGE_URL={url}",
                           "-P", str(MODULE)], capture_output=True, text=True, env=_env(),
                          timeout=120, check=False)


def _headers_left(work: Path) -> list[str]:
    return sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())


def _one_line(text: str) -> str:
    """CMake wraps its messages; the test reads them as one line."""
    return " ".join(text.split())


def test_lock_pins_the_header_the_host_parity_was_measured_with() -> None:
    data = _pinned_bytes()
    assert LOCK["url"] == ("https://raw.githubusercontent.com/nothings/stb/"
                           f"{LOCK['commit']}/{LOCK['path']}")
    assert re.fullmatch(r"[0-9a-f]{40}", LOCK["commit"]) and LOCK["commit"].startswith("8b5f1f3")
    assert LOCK["size"] == len(data)
    assert data.startswith(b"/* stb_image - v2.27 ") and LOCK["version"] == "v2.27"
    assert data.count(BUG) == 1


def test_fetches_verifies_and_patches_then_reuses_the_verified_copy(
        server: Server, tmp_path: Path) -> None:
    run = _script(tmp_path, f"{server.url}/good")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "upstream" / "stb_image.h").read_bytes() == server.data
    assert (tmp_path / "include" / "stb_image.h").read_bytes() == _patched(server.data)
    assert _headers_left(tmp_path) == ["include/stb_image.h", "upstream/stb_image.h"]
    # A second run (every pod install, every Android configure) needs no network.
    again = _script(tmp_path, f"{server.url}/gone")
    assert again.returncode == 0, again.stderr
    assert server.requests == ["/good"]


@pytest.mark.parametrize(("path", "says"), [
    ("/wrong", "sent 279339 bytes with sha256"),
    ("/short", "sent 139669 bytes with sha256"),
    ("/short", "the download was cut off"),
    ("/cut", "downloading"),
    ("/missing", "downloading"),
])
def test_a_wrong_or_failed_download_is_a_clear_error_and_leaves_no_header(
        server: Server, tmp_path: Path, path: str, says: str) -> None:
    # A stale, wrong header from before must not survive a failed refresh either.
    (tmp_path / "upstream").mkdir()
    (tmp_path / "upstream" / "stb_image.h").write_bytes(b"/* not stb_image */\n")
    url = f"{server.url}{path}"
    run = _script(tmp_path, url)
    assert run.returncode != 0
    message = _one_line(run.stderr)
    assert "stb_image.h" in message and url in message and says in message, message
    assert LOCK["sha256"] in message and "RNE_STB_IMAGE_URL" in message, message
    assert _headers_left(tmp_path) == []
    assert server.requests == [path]


def test_a_cmake_project_includes_the_module(server: Server, tmp_path: Path) -> None:
    """The Android build's use: include, prepare at configure time; the URL override from the
    environment (what the podspec passes through)."""
    if CMAKE is None:
        pytest.skip("cmake is not installed")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.22)\n"
        "project(stb_consumer LANGUAGES NONE)\n"
        f'include("{MODULE.as_posix()}")\n'
        'rne_stb_image_prepare("${CMAKE_BINARY_DIR}/stb" STB_INCLUDE)\n'
        'file(WRITE "${CMAKE_BINARY_DIR}/include_dir.txt" "${STB_INCLUDE}")\n')
    build = tmp_path / "build"
    run = subprocess.run([CMAKE, "-S", str(src), "-B", str(build)], capture_output=True,
                         text=True, env=_env(RNE_STB_IMAGE_URL=f"{server.url}/good"),
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    include = Path((build / "include_dir.txt").read_text())
    assert include == build / "stb" / "include"
    assert (include / "stb_image.h").read_bytes() == _patched(server.data)


# --- the phone recipes ---------------------------------------------------------------------

def _code(text: str, comment: str) -> str:
    return "\n".join(line.split(comment)[0] for line in text.splitlines())


ANDROID_CMAKE = _code((PACKAGE_DIR / "android" / "CMakeLists.txt").read_text(), "#")
GRADLE = _code((PACKAGE_DIR / "android" / "build.gradle").read_text(), "//")
PODSPEC = _code((PACKAGE_DIR / "react-native-executorch.podspec").read_text(), "#")
MEDIA_SOURCES = sorted(p.relative_to(PACKAGE_DIR).as_posix()
                       for p in (PACKAGE_DIR / "cpp" / "media" / "src").glob("*.cpp"))


def _cmake_call(command: str, first_arg: str) -> str:
    """The arguments of ``command(first_arg ...)`` in the Android CMake."""
    m = re.search(rf"{re.escape(command)}\(\s*{re.escape(first_arg)}\b(.*?)\)\s*$", ANDROID_CMAKE,
                  re.S | re.M)
    assert m, f"{command}({first_arg} ...) is not in android/CMakeLists.txt"
    return m.group(1)


def _ruby_list(text: str, name: str) -> list[str]:
    m = re.search(rf"{re.escape(name)}\s*=>?\s*\[(.*?)\]", text, re.S)
    assert m, f"{name} is not in the podspec"
    return re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))


def test_android_compiles_cpp_media_with_the_pinned_header() -> None:
    assert 'include("${RNE_CPP_DIR}/cmake/stb_image.cmake")' in ANDROID_CMAKE
    assert 'rne_stb_image_prepare("${CMAKE_BINARY_DIR}/stb" RNE_STB_IMAGE_INCLUDE)' in ANDROID_CMAKE
    assert ('file(GLOB RNE_MEDIA_SOURCES CONFIGURE_DEPENDS "${RNE_CPP_DIR}/media/src/*.cpp")'
            in ANDROID_CMAKE)
    assert MEDIA_SOURCES and "${RNE_MEDIA_SOURCES}" in _cmake_call("add_library",
                                                                   "react-native-executorch")
    includes = _cmake_call("target_include_directories", "react-native-executorch")
    assert '"${RNE_CPP_DIR}/media/include"' in includes
    assert '"${RNE_STB_IMAGE_INCLUDE}"' in includes
    assert "RNE_WITH_MEDIA=1" in _cmake_call("target_compile_definitions",
                                             "react-native-executorch")
    assert '"-DRNE_STB_IMAGE_URL=${stbImageUrl}"' in GRADLE


def test_pod_compiles_cpp_media_with_the_pinned_header() -> None:
    sources = _ruby_list(PODSPEC, "s.source_files")
    excluded = _ruby_list(PODSPEC, "s.exclude_files")
    assert "cpp/media/src/**/*.cpp" in sources and "cpp/media/include/**/*.h" in sources
    assert {"cpp/media/tests/**/*", "cpp/media/tools/**/*"} <= set(excluded)
    # The downloaded headers are reached through the search path only, never as pod headers.
    assert "ios/**/*.{h,mm}" in sources and "ios/generated/**/*" in excluded
    work = re.search(r'stb_work_dir = File\.join\(__dir__, "ios", "generated", "stb"\)', PODSPEC)
    assert work and 'File.join(__dir__, "cpp", "cmake", "stb_image.cmake")' in PODSPEC
    assert re.search(r'system\("cmake", "-DRNE_STB_WORK_DIR=" \+ stb_work_dir, "-P"', PODSPEC)
    defines = re.search(r'"GCC_PREPROCESSOR_DEFINITIONS" => "([^"]*)"', PODSPEC)
    assert defines and "RNE_WITH_MEDIA=1" in defines.group(1).split()
    paths = _ruby_list(PODSPEC, '"HEADER_SEARCH_PATHS"')
    assert r"\"$(PODS_TARGET_SRCROOT)/cpp/media/include\"" in paths
    assert r"\"$(PODS_TARGET_SRCROOT)/ios/generated/stb/include\"" in paths


def test_media_sources_compile_with_the_phone_flags(server: Server, tmp_path: Path) -> None:
    """What both recipes compile, as they compile it (C++20, RNE_WITH_MEDIA, the patched pinned
    header): cpp/media and the seam's media path, syntax only."""
    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    assert _script(tmp_path, f"{server.url}/good").returncode == 0
    cpp = PACKAGE_DIR / "cpp"
    includes = [cpp / "base/include", cpp / "media/include", cpp / "runner/include",
                cpp / "grammar/include", cpp / "tokenizer/include",
                cpp / "json/include", cpp / "seam", tmp_path / "include"]
    for source in [*MEDIA_SOURCES, "cpp/seam/seam_core.cpp"]:
        run = subprocess.run([compiler, "-std=c++20", "-fsyntax-only", "-DRNE_WITH_MEDIA=1",
                              *(f"-I{d}" for d in includes), str(PACKAGE_DIR / source)],
                             capture_output=True, text=True, timeout=300, check=False)
        assert run.returncode == 0, f"{source}: {run.stderr[-3000:]}"

"""A new Expo app consumes the package as a user's would: created in a temporary folder from the
pinned npm packages of the example app (from the npm cache setup filled), the packed tarball
installed, the config plugin added, `expo prebuild --no-install` run. Then what a real build would
receive: autolinking finds the module, the plugin's settings are in the generated projects, and
the fetch script, run as the podspec and Gradle run it against binaries published to the
127.0.0.1 Hub, leaves them where the podspec and android/CMakeLists.txt look (that CMake file is
configured with them, up to React Native's prefab packages, which only Gradle provides)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hub_server import serve_hub
from rne_tools.binaries.elf import misaligned_segments
from rne_tools.paths import REPO_ROOT
from staged_binaries import have_compilers, stage_android, stage_ios

pytestmark = pytest.mark.skipif(not have_compilers(), reason="needs gcc and aarch64-linux-gnu-gcc "
                                "(scripts/setup.sh installs crossbuild-essential-arm64)")
PACKAGE = REPO_ROOT / "packages" / "react-native-executorch"
TOKEN = "hf_test_token_5b0c1e77d2"
STB_HEADER = Path("/usr/include/stb/stb_image.h")  # Debian's: the bytes the stb pin locks
ENTITLEMENT = "com.apple.developer.kernel.increased-memory-limit"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RNE_BINARIES", "HF_"))}
    env.update(CI="1", EXPO_NO_GIT_STATUS="1", EXPO_NO_TELEMETRY="1", **extra)
    return env


def _run(args: list[str], cwd: Path, timeout: int = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=_env(**env))


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("fresh-app")
    times = {}
    t = time.monotonic()
    packed = _run(["npm", "pack", "--json", "--pack-destination", str(base)], PACKAGE)
    assert packed.returncode == 0, packed.stderr[-3000:]
    tarball = base / json.loads(packed.stdout[packed.stdout.index("["):])[0]["filename"]
    times["npm pack"] = time.monotonic() - t

    # The binaries, staged as build_binaries.py stages them and released to the 127.0.0.1 Hub.
    staged = [stage_android(base / "android-all", vulkan=True), stage_android(base / "android-cpu", vulkan=False),
              stage_ios(base / "ios-all", mlx=True), stage_ios(base / "ios-cpu", mlx=False)]
    hub_cm = serve_hub({TOKEN: "software-mansion"})
    hub = hub_cm.__enter__()
    lock = base / "binaries.lock.json"
    published = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "publish_binaries.py"),
         *[a for s in staged for a in ("--staged", str(s))], "--endpoint", hub.url,
         "--out-dir", str(base / "release"), "--lock", str(lock)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
        env={**_env(), "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(base / "hf")})
    assert published.returncode == 0, published.stderr

    # The app: the example app's pins of expo, react and react-native, and the tarball.
    pins = json.loads((REPO_ROOT / "apps" / "llm" / "package.json").read_text())["dependencies"]
    root = base / "app"
    root.mkdir()
    (root / "package.json").write_text(json.dumps({
        "name": "fresh-app", "version": "1.0.0", "private": True, "main": "index.js",
        "dependencies": {**{k: pins[k] for k in ("expo", "react", "react-native")},
                         "react-native-executorch": f"file:{tarball}"}}))
    (root / "index.js").write_text("import 'react-native-executorch';\n")
    (root / "app.json").write_text(json.dumps({"expo": {
        "name": "fresh", "slug": "fresh",
        "ios": {"bundleIdentifier": "com.example.fresh", "deploymentTarget": "15.1"},
        "android": {"package": "com.example.fresh"},
        "plugins": [["react-native-executorch", {"backends": "cpu"}]]}}))
    t = time.monotonic()
    install = _run(["npm", "install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], root)
    assert install.returncode == 0, install.stderr[-3000:]
    times["npm install"] = time.monotonic() - t
    t = time.monotonic()
    prebuild = _run(["npx", "expo", "prebuild", "--no-install", "--platform", "all"], root)
    assert prebuild.returncode == 0, prebuild.stdout[-3000:] + prebuild.stderr[-3000:]
    times["expo prebuild"] = time.monotonic() - t
    print("\nfresh app: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))

    installed = root / "node_modules" / "react-native-executorch"
    # The package as released with these binaries: its lock names them.
    shutil.copyfile(lock, installed / "binaries.lock.json")
    try:
        yield {"root": root, "pkg": installed, "lock": json.loads(lock.read_text()), "base": base}
    finally:
        hub_cm.__exit__(None, None, None)


def _autolinking(app: dict, platform: str) -> dict:
    cli = app["root"] / "node_modules" / "expo-modules-autolinking" / "bin" / "expo-modules-autolinking.js"
    result = _run(["node", str(cli), "react-native-config", "--json", "--platform", platform], app["root"])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["dependencies"]["react-native-executorch"]["platforms"][platform]


def test_autolinking_finds_the_pod_and_the_android_project(app):
    ios = _autolinking(app, "ios")
    assert Path(ios["podspecPath"]) == app["pkg"] / "react-native-executorch.podspec"
    assert ios["version"] == app["lock"]["version"]
    android = _autolinking(app, "android")
    source = Path(android["sourceDir"])
    assert source == app["pkg"] / "android"
    assert android["packageInstance"] == "new RNExecutorchPackage()"
    gradle = (source / "build.gradle").read_text()
    assert re.search(r'path "CMakeLists.txt"', gradle) and (source / "CMakeLists.txt").is_file()


def test_plugin_settings_are_in_the_generated_projects(app):
    ios = app["root"] / "ios"
    podfile = json.loads((ios / "Podfile.properties.json").read_text())
    assert podfile["ios.deploymentTarget"] == "17.0"  # app.json asked for 15.1
    assert podfile["rneBinariesBackends"] == "cpu"
    pbxproj = (ios / "fresh.xcodeproj" / "project.pbxproj").read_text()
    assert re.findall(r"IPHONEOS_DEPLOYMENT_TARGET = ([\d.]+);", pbxproj)[:2] == ["17.0", "17.0"]
    entitlements = (ios / "fresh" / "fresh.entitlements").read_text()
    assert re.search(rf"<key>{re.escape(ENTITLEMENT)}</key>\s*<true/>", entitlements)
    props = dict(re.findall(r"^([\w.]+)=(.*)$", (app["root"] / "android" / "gradle.properties").read_text(), re.M))
    assert props["android.minSdkVersion"] == "26"
    assert props["reactNativeArchitectures"] == "arm64-v8a,x86_64"
    assert props["rneBinariesBackends"] == "cpu"


# CocoaPods evaluates a podspec with `eval(text, nil, path)`; this does the same with the two
# things of CocoaPods it touches stubbed (Pod::Spec records what it is given, Pod::Config says
# where the Podfile is), and prints the attributes.
_EVAL_PODSPEC = """
require "json"
require "pathname"
module Pod
  class Config
    Instance = Struct.new(:installation_root)
    def self.instance = (@instance ||= Instance.new(Pathname.new(ENV.fetch("PODFILE_DIR"))))
  end
  class Spec
    attr_reader :attrs
    def initialize = (@attrs = {}; yield self)
    def method_missing(name, *args)
      key = name.to_s.chomp("=")
      return @attrs[key] = args.first if name.end_with?("=")
      @attrs.key?(key) ? @attrs[key] : super
    end
    def respond_to_missing?(*) = true
  end
end
def install_modules_dependencies(spec) = nil
spec = eval(File.read(ARGV[0]), nil, ARGV[0])
root = File.dirname(ARGV[0])
globs = Array(spec.attrs["source_files"]).to_h { |g| [g, Dir.glob(File.join(root, g)).size] }
puts JSON.generate(spec.attrs.merge("globbed" => globs))
"""


def test_pod_install_evaluates_the_podspec_with_the_fetched_xcframework(app, tmp_path):
    ruby = shutil.which("ruby")
    if ruby is None:
        pytest.skip("ruby is missing (scripts/setup.sh installs it): the podspec was not evaluated")
    if not STB_HEADER.is_file():
        pytest.skip(f"{STB_HEADER} (Debian's libstb-dev) is missing: the podspec's stb step cannot run")
    podspec = app["pkg"] / "react-native-executorch.podspec"
    result = _run([ruby, "-e", _EVAL_PODSPEC, str(podspec)], app["root"] / "ios",
                  PODFILE_DIR=str(app["root"] / "ios"), RNE_BINARIES_CACHE=str(tmp_path / "cache"),
                  RNE_STB_IMAGE_URL=f"file://{STB_HEADER}")
    assert result.returncode == 0, result.stderr[-3000:]
    spec = json.loads(result.stdout.strip().splitlines()[-1])
    # The backend set came from Podfile.properties.json (the plugin's "cpu").
    entry = app["lock"]["artifacts"]["ios"]["cpu"]
    linked = app["pkg"] / "third-party" / "ios"
    assert linked.resolve() == (tmp_path / "cache" / entry["sha256"]).resolve()
    framework = app["pkg"] / spec["vendored_frameworks"]
    assert (framework / "Info.plist").is_file()
    assert (framework / "ios-arm64" / "libexecutorch.a").read_bytes()[:8] == b"!<arch>\n"
    assert "resources" not in spec  # the cpu set has no mlx.metallib to ship
    assert not (linked / "mlx.metallib").exists()
    assert all(n > 0 for n in spec["globbed"].values()), spec["globbed"]
    assert spec["platforms"] == {"ios": "17.0"} and spec["version"] == app["lock"]["version"]
    # stb_image.h, fetched from the pin the tarball carries and patched at `pod install`.
    assert (app["pkg"] / "ios" / "generated" / "stb" / "include" / "stb_image.h").is_file()

    # Without binaries for the chosen set the evaluation stops, saying why.
    empty = dict(app["lock"], artifacts={})
    lock = app["pkg"] / "binaries.lock.json"
    saved = lock.read_text()
    lock.write_text(json.dumps(empty))
    try:
        failed = _run([ruby, "-e", _EVAL_PODSPEC, str(podspec)], app["root"] / "ios",
                      PODFILE_DIR=str(app["root"] / "ios"), RNE_BINARIES_CACHE=str(tmp_path / "cache"))
    finally:
        lock.write_text(saved)
    assert failed.returncode != 0
    assert 'has no ios "cpu" artifact' in failed.stderr
    assert "could not get ExecuTorch.xcframework" in failed.stderr


def test_fetch_as_gradle_runs_it_feeds_android_cmake(app, tmp_path):
    props = dict(re.findall(r"^([\w.]+)=(.*)$", (app["root"] / "android" / "gradle.properties").read_text(), re.M))
    abis = props["reactNativeArchitectures"].split(",")
    result = _run(["node", str(app["pkg"] / "scripts" / "fetch-binaries.js"), "android", "--json",
                   *[a for abi in abis for a in ("--abi", abi)]], app["pkg"] / "android",
                  RNE_BINARIES_BACKENDS=props["rneBinariesBackends"], RNE_BINARIES_CACHE=str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    dirs = json.loads(result.stdout)["dirs"]
    assert sorted(dirs) == sorted(abis)
    for abi in abis:
        assert Path(dirs[abi]) == tmp_path / "cache" / app["lock"]["artifacts"]["android"]["cpu"][abi]["sha256"]
        assert misaligned_segments(Path(dirs[abi]) / abi / "libexecutorch.so") == []
    if not STB_HEADER.is_file():
        pytest.skip(f"{STB_HEADER} (Debian's libstb-dev) is missing: android/CMakeLists.txt not configured")
    cmake = shutil.which("cmake", path=str(REPO_ROOT / ".venv" / "bin")) or "cmake"
    configure = _run([cmake, "-S", str(app["pkg"] / "android"), "-B", str(tmp_path / "cmake"),
                      "-DANDROID_ABI=arm64-v8a", f"-DRNE_THIRD_PARTY_DIR_arm64-v8a={dirs['arm64-v8a']}",
                      f"-DRNE_STB_IMAGE_URL=file://{STB_HEADER}"], tmp_path, timeout=300)
    out = configure.stdout + configure.stderr
    assert f"ExecuTorch binaries for arm64-v8a: {dirs['arm64-v8a']}" in out
    assert (tmp_path / "cmake" / "stb" / "include" / "stb_image.h").is_file()  # fetched from the pin
    # Everything of ours configured; what fails is React Native's prefab package, which Gradle supplies.
    assert configure.returncode != 0 and "ReactAndroid" in out, out[-3000:]


# Gradle evaluates build.gradle as a Groovy script over its Project; this runs the installed one
# the same way with the few Project members it reads before `android {}` stubbed (properties from
# the app's gradle.properties, file(), projectDir, logger) and the DSL blocks ignored, then prints
# the CMake arguments and ABIs it settled on.
_GRADLE_STUB = """
abstract class GradleStub extends Script {
  File getProjectDir() { new File(System.getenv("PROJECT_DIR")) }
  def findProperty(String name) {
    def props = new Properties()
    new File(System.getenv("GRADLE_PROPERTIES")).withInputStream { props.load(it) }
    return props.getProperty(name)
  }
  File file(Object path) { new File(path.toString()) }
  def getLogger() { [lifecycle: { String m -> System.err.println(m) }] }
  def methodMissing(String name, args) { null }
}
class GradleException extends RuntimeException { GradleException(String m) { super(m) } }
"""


def test_gradle_evaluates_build_gradle_with_the_fetched_libraries(app, tmp_path):
    groovy, java = shutil.which("groovy"), shutil.which("java")
    if groovy is None or java is None:
        pytest.skip("groovy or java is missing (scripts/setup.sh installs groovy): build.gradle "
                    "was not evaluated")
    java_home = str(Path(os.path.realpath(java)).parent.parent)
    (tmp_path / "GradleStub.groovy").write_text(_GRADLE_STUB)
    compiled = _run([shutil.which("groovyc") or "groovyc", "-d", str(tmp_path / "cls"),
                     str(tmp_path / "GradleStub.groovy")], tmp_path, JAVA_HOME=java_home)
    assert compiled.returncode == 0, compiled.stderr
    script = tmp_path / "build_gradle.groovy"
    script.write_text((app["pkg"] / "android" / "build.gradle").read_text() +
                      '\nprintln(groovy.json.JsonOutput.toJson([args: rneCmakeArguments, abis: rneAbis]))\n')
    result = _run([groovy, "-cp", str(tmp_path / "cls"), "--basescript", "GradleStub", str(script)],
                  tmp_path, JAVA_HOME=java_home, PROJECT_DIR=str(app["pkg"] / "android"),
                  GRADLE_PROPERTIES=str(app["root"] / "android" / "gradle.properties"),
                  RNE_BINARIES_CACHE=str(tmp_path / "cache"), timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["abis"] == ["arm64-v8a", "x86_64"]
    cpu = app["lock"]["artifacts"]["android"]["cpu"]  # the backend set of gradle.properties
    for abi in out["abis"]:
        assert f"-DRNE_THIRD_PARTY_DIR_{abi}={tmp_path / 'cache' / cpu[abi]['sha256']}" in out["args"]
        assert (tmp_path / "cache" / cpu[abi]["sha256"] / abi / "libexecutorch.so").is_file()


class _Mirror(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        data = self.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.mark.parametrize("fault", ["corrupt", "short", "unreachable"])
def test_a_bad_artifact_fails_the_build_step_with_its_url(app, tmp_path, fault):
    entry = app["lock"]["artifacts"]["ios"]["cpu"]
    data = (app["base"] / "release" / entry["file"]).read_bytes()
    _Mirror.files = {f"/{entry['file']}": {"corrupt": data[:-1] + bytes([data[-1] ^ 1]),
                                           "short": data[: len(data) // 3]}.get(fault, data)}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Mirror)
    port = server.server_address[1]
    if fault == "unreachable":
        server.server_close()
    else:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    cache = tmp_path / "cache"
    link = app["base"] / f"link-{fault}"
    try:
        result = _run(["node", str(app["pkg"] / "scripts" / "fetch-binaries.js"), "ios", "--link", str(link)],
                      app["root"] / "ios", RNE_BINARIES_BACKENDS="cpu", RNE_BINARIES_CACHE=str(cache),
                      RNE_BINARIES_MIRROR=f"http://127.0.0.1:{port}")
    finally:
        if fault != "unreachable":
            server.shutdown()
            server.server_close()
    url = f"http://127.0.0.1:{port}/{entry['file']}"
    assert result.returncode == 1
    assert url in result.stderr
    assert {"corrupt": "the download is corrupt or was altered and was deleted",
            "short": f"the connection closed after {len(data) // 3} of {len(data)} bytes",
            "unreachable": "ECONNREFUSED"}[fault] in result.stderr
    assert not link.exists()
    assert not (cache / entry["sha256"]).exists()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".unpack-")] == [] if cache.exists() else True


def test_tarball_leaves_the_binaries_out(app):
    """The binaries come from the lock at build time, never inside the npm package."""
    tarball = next(app["base"].glob("react-native-executorch-*.tgz"))
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert not [n for n in names if n.endswith((".so", ".a", ".xcframework", ".metallib", ".zip"))]
    assert socket.gethostbyname("127.0.0.1")  # the Hub and mirrors of these tests were local

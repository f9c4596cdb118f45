"""The host build, executed for real: `build_binaries.py --platform host` into build/host."""

import json
import subprocess
import sys

from rne_tools.binaries.manifest import verify_manifest
from rne_tools.paths import REPO_ROOT

CLI = [sys.executable, str(REPO_ROOT / "tools" / "build_binaries.py")]
MANIFEST = REPO_ROOT / "build" / "host" / "manifest.json"


def test_host_build_runs_records_and_verifies():
    build = subprocess.run([*CLI, "--platform", "host", "--jobs", "2"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    assert "artifact(s) recorded in build/host/manifest.json" in build.stdout

    manifest = json.loads(MANIFEST.read_text())
    entry = manifest["builds"]["host"]
    paths = {a["path"] for a in entry["artifacts"]}
    assert "host/rne_llm" in paths  # the CLI the end-to-end tests drive
    assert all((REPO_ROOT / "build" / "host" / p).is_file() for p in paths)
    assert entry["source"]["executorch_wheel"].startswith("1.5.1")
    assert tuple(int(x) for x in entry["tools"]["cmake"].split(".")[:2]) >= (3, 28)
    assert verify_manifest(MANIFEST).ok

    verify = subprocess.run([*CLI, "--platform", "host", "--verify"], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.startswith(f"ok: {len(paths)} artifact(s) match")


def test_verify_without_a_manifest_fails_clearly():
    result = subprocess.run([*CLI, "--platform", "ios", "--verify"], capture_output=True, text=True)
    if (REPO_ROOT / "third-party" / "ios" / "manifest.json").exists():
        assert result.returncode == 0, result.stderr  # staged binaries must match their manifest
    else:
        assert result.returncode == 1
        assert "no manifest at" in result.stderr and "build the platform first" in result.stderr


def test_host_plan_runs_exactly_the_commands_of_the_cpp_readme():
    """The host plan is the configure/build pair documented in packages/.../cpp/README.md."""
    import shlex

    from rne_tools.binaries.platforms import host_build_argv, host_configure_argv

    readme = (REPO_ROOT / "packages" / "react-native-executorch" / "cpp" / "README.md").read_text()
    commands = [shlex.split(line) for line in readme.splitlines() if line.startswith("cmake ")]
    configure = [c for c in commands if c[:2] == ["cmake", "-S"]]
    build = [c for c in commands if c[:2] == ["cmake", "--build"]]
    assert configure == [list(host_configure_argv())]
    assert len(build) == 1
    jobs = int(build[0][build[0].index("-j") + 1])
    assert build == [list(host_build_argv(jobs))]
    assert "export PATH=\"$PWD/.venv/bin:$PATH\"" in readme  # == the executor's PATH order

"""The package's JavaScript on Hermes, as a phone runs it, against the same bundle on Node.

driver.ts (packages/react-native-executorch/__tests__/hermes/) is bundled with the package's
src/ by Metro, compiled to bytecode by the pinned Hermes's hermesc, and run by
cpp/hermes_host/ (a bare Hermes runtime with the real JSI binding over the real runner) with the
real SmolLM2 export: load, a streamed answer, interrupt, a JSON-schema answer, a forced tool
call, release, garbage collection. The same bundle runs on Node over the Node-API addon; both
must give the same texts (greedy decoding), and both engines' numbers are printed side by side.

Hermes is built from pinned source by tools/build_hermes.py into the cache (~/.cache/rne); that
takes long enough that setup does not do it. Where it is absent the check prints one NOT RUN
line; the pin's agreement with React Native's own Hermes is checked everywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rne_tools.binaries.hermes import HermesLayout, bytecode_version, load_hermes_lock
from rne_tools.paths import CACHE_DIR, PACKAGE_DIR, REPO_ROOT, cache_root

SOURCE = PACKAGE_DIR / "cpp" / "hermes_host"
DRIVER = PACKAGE_DIR / "__tests__" / "hermes"
BUILD = CACHE_DIR / "build" / "hermes-host"
BIN = Path(sys.executable).parent  # the venv's cmake and ninja
RN = REPO_ROOT / "node_modules" / "react-native"
NPM_HERMESC = REPO_ROOT / "node_modules" / "hermes-compiler" / "hermesc" / "linux64-bin" / "hermesc"


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return result


def test_the_pin_is_the_hermes_react_native_runs() -> None:
    lock = load_hermes_lock()
    assert json.loads((RN / "package.json").read_text())["version"] == lock.react_native, \
        "react-native moved: pin its Hermes (sdks/.hermesv1version) in third-party/hermes.lock.json"
    assert (RN / "sdks" / ".hermesv1version").read_text().strip() == lock.tag
    # The compiler React Native's build uses emits the bytecode the pinned VM must run.
    assert bytecode_version(NPM_HERMESC) == lock.bytecode_version


@pytest.fixture(scope="module")
def hermes() -> HermesLayout:
    layout = HermesLayout(cache_root(), load_hermes_lock())
    if layout.built() is None:
        pytest.skip("NOT RUN: Hermes is not built here (run `.venv/bin/python tools/build_hermes.py "
                    "--source-mirror DIR` once; docs/distribution.md)")
    return layout


@pytest.fixture(scope="module")
def host(hermes: HermesLayout) -> dict[str, Path]:
    # The binding is compiled against React Native's jsi.h and run by a VM built with Hermes's.
    ours, theirs = RN / "ReactCommon" / "jsi" / "jsi" / "jsi.h", hermes.source / "API" / "jsi" / "jsi" / "jsi.h"
    assert ours.read_bytes() == theirs.read_bytes(), f"{ours} and {theirs} differ: the JSI ABI may not match"
    # Configured every time (seconds): a new pin moves the Hermes paths.
    _run([str(BIN / "cmake"), "-S", str(SOURCE), "-B", str(BUILD), "-G", "Ninja",
          f"-DCMAKE_MAKE_PROGRAM={BIN / 'ninja'}", "-DCMAKE_BUILD_TYPE=Release",
          f"-DRNE_PYTHON={sys.executable}", f"-DRNE_HERMES_SOURCE_DIR={hermes.source}",
          f"-DRNE_HERMES_VM_LIBRARY={hermes.vm_library}"])
    _run([str(BIN / "cmake"), "--build", str(BUILD), "--target", "rne_hermes_host", "rne_node",
          "--parallel", "2"])
    return {"host": BUILD / "rne_hermes_host", "addon": BUILD / "rne_cpp" / "node" / "rne_node.node"}


@pytest.fixture(scope="module")
def bundle(hermes: HermesLayout, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("hermes-bundle")
    js, hbc = out / "driver.js", out / "driver.hbc"
    _run(["node", str(DRIVER / "bundle.js"), str(js)], cwd=REPO_ROOT, timeout=900)
    _run([str(hermes.hermesc), "-emit-binary", "-O", "-w", "-out", str(hbc), str(js)])
    return {"js": js, "hbc": hbc}


def _result(output: str) -> dict:
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert lines, output[-6000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def test_package_runs_on_hermes_as_on_node(host, bundle, smollm2_fp32, smollm2_checkpoint) -> None:
    args = [str(smollm2_fp32.pte_path), str(smollm2_checkpoint)]
    # Source text is refused: what runs is bytecode, as apps ship it.
    source = subprocess.run([str(host["host"]), str(bundle["js"]), *args],
                            capture_output=True, text=True, check=False, timeout=60)
    assert source.returncode == 2 and "is not Hermes bytecode" in source.stderr, source.stderr

    on_hermes = subprocess.run([str(host["host"]), str(bundle["hbc"]), *args, "600"],
                               capture_output=True, text=True, check=False, timeout=660)
    assert on_hermes.returncode == 0, (on_hermes.stdout + on_hermes.stderr)[-8000:]
    on_node = subprocess.run(["node", "--expose-gc", str(DRIVER / "node_run.js"), str(host["addon"]),
                              str(bundle["js"]), *args],
                             capture_output=True, text=True, check=False, timeout=660)
    assert on_node.returncode == 0, (on_node.stdout + on_node.stderr)[-8000:]
    hermes_result, node_result = _result(on_hermes.stdout), _result(on_node.stdout)

    print(f"\n{'':28}{'Hermes':>12}{'Node':>12}")
    for name, value in hermes_result["numbers"].items():
        print(f"{name:28}{value:>12}{node_result['numbers'][name]:>12}")
    print(f"engines: {hermes_result['engine']}; {node_result['engine']}")
    # Same runner, model and greedy decoding: the JavaScript engine must not change a word.
    assert hermes_result["texts"] == node_result["texts"]
    # Interrupted answers: the same text up to where the later interrupt landed.
    short, long = sorted((hermes_result["interrupted"], node_result["interrupted"]), key=len)
    assert long.startswith(short), (short, long)

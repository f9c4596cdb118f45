"""The React Native JSI binding run for real on the host, with the real runner and SmolLM2.

No JS engine with JSI exists here, so `packages/react-native-executorch/cpp/jsi/tests/` supplies
an in-memory jsi::Runtime and a queueing CallInvoker; everything else is the code that ships:
the binding (cpp/jsi), React Native's jsi.cpp, the runner and tokenizer, the ExecuTorch runtime
from the venv, and the real SmolLM2-135M-Instruct export (the shared, cached fp32 fixture: the
binding is under test here, not quantization).
The build is kept under .cache/build/jsi-binding, so reruns only rebuild what changed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rne_tools.paths import CACHE_DIR, PACKAGE_DIR, REPO_ROOT

SOURCE = PACKAGE_DIR / "cpp" / "jsi" / "tests"
BUILD = CACHE_DIR / "build" / "jsi-binding"
BIN = Path(sys.executable).parent  # the venv's cmake and ninja (CMake >= 3.28)


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return result


def _build() -> Path:
    if not (BUILD / "CMakeCache.txt").is_file():
        _run([str(BIN / "cmake"), "-S", str(SOURCE), "-B", str(BUILD), "-G", "Ninja",
              f"-DCMAKE_MAKE_PROGRAM={BIN / 'ninja'}", "-DCMAKE_BUILD_TYPE=Release",
              f"-DRNE_PYTHON={sys.executable}"])
    _run([str(BIN / "cmake"), "--build", str(BUILD), "--target", "rne_jsi_binding_tests",
          "--parallel", "2"])
    return BUILD / "rne_jsi_binding_tests"


def test_binding_runs_smollm2_through_jsi(smollm2_fp32, smollm2_checkpoint: Path) -> None:
    binary = _build()
    env = dict(os.environ,
               RNE_JSI_TEST_PTE=str(smollm2_fp32.pte_path),
               RNE_JSI_TEST_TOKENIZER=str(smollm2_checkpoint / "tokenizer.json"))
    result = subprocess.run([str(binary), "--gtest_brief=1"], capture_output=True, text=True,
                            env=env, cwd=REPO_ROOT, check=False, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-8000:]
    assert "[  PASSED  ] 8 tests." in output, output[-4000:]

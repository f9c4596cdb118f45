"""The arm64 build (`build_binaries.py --platform linux-arm64`, build/linux-arm64) run on this
x86-64 machine under qemu-user: what a phone's CPU executes of our native code.

- ctest: every C++ suite, its test commands run through the build's CROSSCOMPILING_EMULATOR;
- the tokenizer parity corpus through the arm64 ``rne_tokenize``, against HF ``tokenizers``;
- the real SmolLM2 8w and 8da4w answering the Paris question through the arm64 ``rne_llm``;
- tiny Gemma 4 on XNNPACK through the arm64 ``rne_logits`` against eager, with the x86-64 bound
  (tests/parity/test_execution_parity.py), on ``-cpu max`` (dotprod, i8mm, SVE: today's phones) and
  ``-cpu cortex-a53`` (ARMv8.0, none of them), printing the ISA flags XNNPACK's cpuinfo reads
  there and the microkernel family they select: a BENCH line, never a speed.

Exports are only reused from the cache (the x86-64 suites make them); one that is not there
skips its test with a NOT RUN reason. Without the build or qemu the module is skipped the same
way: scripts/test.sh builds it where the cross toolchain is installed (docs/arm64.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import SMOLLM2_8DA4W
from rne_tools.paths import REPO_ROOT

BUILD = REPO_ROOT / "build" / "linux-arm64"
SYSROOT = Path("/usr/aarch64-linux-gnu")
QEMU = shutil.which("qemu-aarch64")
CPUS = ("max", "cortex-a53")  # with and without the ISA extensions

if QEMU is None or not (BUILD / "host" / "rne_llm").is_file():
    pytest.skip("NOT RUN: no arm64 build or no qemu-aarch64: `apt-get install -y "
                "crossbuild-essential-arm64 qemu-user` and `.venv/bin/python "
                "tools/build_binaries.py --platform linux-arm64`", allow_module_level=True)

pytestmark = pytest.mark.slow


def emulated(binary: Path, tmp_path: Path, cpu: str = "max") -> Path:
    """An executable script that runs the arm64 ``binary`` under qemu on ``cpu``: what the
    helpers written for host binaries take as their binary."""
    # qemu answers a missing file with exit status 1 and no message.
    assert binary.is_file(), f"{binary} was not built: rerun build_binaries.py --platform linux-arm64"
    wrapper = tmp_path / f"{binary.name}-{cpu}"
    wrapper.write_text(f'#!/bin/sh\nexec "{QEMU}" -cpu {cpu} -L "{SYSROOT}" "{binary}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def cached_export_of(model_id: str, backend: str, quantization: str, **request):
    """The cached export of this request, exported first if no suite made it yet (on a new
    machine these cases may run before the x86-64 suites that use the same exports)."""
    from rne_tools.export import cached_export

    export = cached_export(model_id, backend, quantization, progress=False, **request)
    return export.plan, export.pte_path, export.report


# Exhaustive suites that cost minutes of CPU each under qemu (softfloat: every float operation
# is a helper call), their code already covered on arm64 by the quicker cases of the same
# suites: the sampler's distribution tests (hundreds of thousands of draws over a large
# vocabulary), the grammar's completion/brute-force sweeps over every state, and the real
# SmolLM2 in fp32 over several turns (test_smollm2_answers_paris runs the real model on arm64).
# CI skips them (one NOT RUN line); RNE_ARM64_CTEST_ALL=1 runs them too.
HEAVY_UNDER_QEMU = (
    "SmolLM2Test.",
    "SamplerTest.LargeVocabulary",
    "SamplerTest.TopPAndMinPDrawsFollowTheExactDistributionAtEveryCut",
    "JsonGrammar.MinimalCompletionCompletesEveryStateAndIsShortest",
    "JsonGrammarGemma4.MinimalCompletionIsDialectAndCompletes",
    "JsonSchemaConstraint.EveryBudgetEndsInACompleteDocument",
)


def executorch_origin() -> str:
    """What ExecuTorch the arm64 build links, from its manifest (docs/arm64.md)."""
    manifest = BUILD / "manifest.json"
    flags = json.loads(manifest.read_text())["builds"]["linux-arm64"]["cmake_flags"]
    return ("ExecuTorch cross-built from the locked source (one libexecutorch.so)"
            if "executorch" in flags else "the ExecuTorch release's aarch64 SDK")


def test_ctest_under_qemu():
    print(f"\narm64 build against {executorch_origin()}")
    everything = os.environ.get("RNE_ARM64_CTEST_ALL") == "1"
    exclude = [] if everything else ["-E", "|".join(HEAVY_UNDER_QEMU).replace(".", "[.]")]
    started = time.monotonic()
    done = subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "ctest"), "--test-dir", str(BUILD),
         "--output-on-failure", "-j", "2", "--timeout", "1200", *exclude],
        capture_output=True, text=True, timeout=3600, env={**os.environ, "QEMU_CPU": "max"})
    summary = [line for line in done.stdout.splitlines() if "tests passed" in line]
    print(f"\nctest under qemu -cpu max: {summary[-1] if summary else '(no summary)'} in "
          f"{time.monotonic() - started:.0f} s")
    if not everything:
        print(f"NOT RUN under qemu (RNE_ARM64_CTEST_ALL=1 runs them): {', '.join(HEAVY_UNDER_QEMU)}")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert summary and "100% tests passed" in summary[-1]


def test_tokenizer_parity_corpus(tmp_path):
    """The whole corpus of test_cpp_tokenizer_parity, every variant, every output field."""
    import test_cpp_tokenizer_parity as parity
    from tokenizers import Tokenizer

    from rne_tools import cpp_tokenizer

    binary = emulated(BUILD / "tokenizer" / "rne_tokenize", tmp_path)
    files = parity.tokenizer_files.__wrapped__(_TmpFactory(tmp_path))
    for variant in parity.VARIANTS:
        hf = Tokenizer.from_file(str(files[variant]))
        as_text = Tokenizer.from_file(str(files[variant]))
        as_text.encode_special_tokens = True
        rows = cpp_tokenizer.encode_with_cpp(binary, files[variant], parity.CORPUS)
        bad = []
        for text, row in zip(parity.CORPUS, rows, strict=True):
            ids = hf.encode(text).ids
            expected = {
                "ids": ids,
                "ids_no_special": hf.encode(text, add_special_tokens=False).ids,
                "ids_as_text": as_text.encode(text, add_special_tokens=False).ids,
                "decoded": hf.decode(ids, skip_special_tokens=False),
                "decoded_skip_special": hf.decode(ids, skip_special_tokens=True),
                "stream": hf.decode(ids, skip_special_tokens=False),
            }
            if any(row[k] != v for k, v in expected.items()):
                bad.append(text[:60])
        assert not bad, f"{variant}: {len(bad)}/{len(parity.CORPUS)} texts differ, e.g. {bad[:3]}"


class _TmpFactory:
    """What the parity module's fixture asks of pytest's tmp_path_factory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def mktemp(self, name: str) -> Path:
        path = self.root / name
        path.mkdir()
        return path


@pytest.mark.parametrize("quantization", ["8w", "8da4w"])
def test_smollm2_answers_paris(quantization, tmp_path):
    from rne_tools.gguf_import import default_checkpoint
    from rne_tools.runtime.text import ChatTokenizer

    request = SMOLLM2_8DA4W if quantization == "8da4w" else {}
    _, pte, _ = cached_export_of("smollm2_135m", "xnnpack", quantization, **request)
    checkpoint = default_checkpoint("smollm2_135m")
    question = "What is the capital of France?"
    done = subprocess.run(
        [emulated(BUILD / "host" / "rne_llm", tmp_path), "--json", "--model", str(pte),
         "--tokenizer", str(checkpoint / "tokenizer.json"), "--max-new-tokens", "12", question],
        capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["prompt_ids"] == ChatTokenizer(checkpoint).user_prompt_ids(question)
    assert "Paris" in out["text"], out["text"]


# The tiny Gemma 4 XNNPACK export and its bound: test_execution_parity's, unchanged.
GEMMA_TINY = dict(random_config="tiny", max_context=64, max_chunk=5)
CHUNKS = [5, 3, 1, 4, 2, 5, 3, 1, 5, 2] + [1] * 8
BOUND_PER_STD = 1e-3

# Linux's AT_HWCAP/AT_HWCAP2 bits for the extensions XNNPACK's cpuinfo reads on aarch64 Linux
# (asm/hwcap.h): which of them qemu's CPU model advertises is what picks the kernels.
_HWCAP_PROBE = r"""
#include <stdio.h>
#include <sys/auxv.h>
int main(void) {
  unsigned long h = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
  printf("fp16=%d dotprod=%d sve=%d i8mm=%d bf16=%d sme=%d\n", !!(h & (1UL << 10)),
         !!(h & (1UL << 20)), !!(h & (1UL << 22)), !!(h2 & (1UL << 13)), !!(h2 & (1UL << 14)),
         !!(h2 & (1UL << 23)));
  return 0;
}
"""


def isa_flags(tmp_path: Path, cpu: str) -> dict[str, bool]:
    source = tmp_path / "hwcap.c"
    source.write_text(_HWCAP_PROBE)
    probe = tmp_path / "hwcap"
    if not probe.is_file():
        subprocess.run(["aarch64-linux-gnu-gcc", "-O1", str(source), "-o", str(probe)], check=True)
    out = subprocess.run([QEMU, "-cpu", cpu, "-L", str(SYSROOT), str(probe)],
                         capture_output=True, text=True, check=True).stdout
    return {k: v == "1" for k, v in (kv.split("=") for kv in out.split())}


def kernel_families(isa: dict[str, bool]) -> str:
    """The XNNPACK microkernel families these flags select for our exports' ops (XNNPACK's
    arm64 dispatch: i8mm before dotprod before plain NEON for the int8 GEMMs)."""
    qd8 = "neoni8mm" if isa["i8mm"] else "neondot" if isa["dotprod"] else "neon"
    f16 = "neonfp16arith" if isa["fp16"] else "none (fp16 converted to fp32)"
    return f"f32 GEMM: aarch64_neonfma; qd8/qc8w GEMM (8w, 8da4w): {qd8}; f16: {f16}"


@pytest.fixture(scope="module")
def gemma_reference():
    from rne_tools.checks.eager import chunked_logits, eager_model
    from rne_tools.checks.parity import random_tokens

    plan, pte, report = cached_export_of("gemma4_e2b", "xnnpack", "fp32", **GEMMA_TINY)
    tokens = random_tokens(report["vocab_size"], sum(CHUNKS))
    return pte, tokens, chunked_logits(eager_model(plan), tokens, CHUNKS)


@pytest.mark.parametrize("cpu", CPUS)
def test_gemma4_xnnpack_matches_eager(cpu, gemma_reference, tmp_path):
    from rne_tools.checks.cpp_runtime import forward_logits
    from rne_tools.checks.parity import Parity

    pte, tokens, eager = gemma_reference
    runtime = forward_logits(pte, tokens, CHUNKS,
                             binary=emulated(BUILD / "host" / "rne_logits", tmp_path, cpu))
    parity = Parity(runtime, eager, None)
    bound = BOUND_PER_STD * eager.std()
    diff, agree, decisive = parity.diff, parity.agreement, parity.decisive(bound)
    isa = isa_flags(tmp_path, cpu)
    print(f"\nPARITY arm64-{cpu} xnnpack-fp32-gemma4-tiny: {len(CHUNKS)} forwards, max|dlogit| "
          f"{diff.max():.5f} (ratio {diff.max() / eager.std():.2e}, bound {BOUND_PER_STD:.0e} "
          f"std), greedy agreement {agree.sum()}/{len(agree)}")
    print(f"BENCH arm64 qemu -cpu {cpu}: ISA {' '.join(k for k, v in isa.items() if v) or 'none'}"
          f" -> XNNPACK {kernel_families(isa)}")
    assert np.isfinite(runtime).all()
    assert diff.max() <= bound, f"forward {diff.argmax()} differs by {diff.max():.5f} > {bound:.5f}"
    assert agree[decisive].all()


def test_cpu_models_differ_in_what_xnnpack_sees(tmp_path):
    """The two runs above cover two kernel paths only if the CPU models really differ."""
    fast, base = isa_flags(tmp_path, "max"), isa_flags(tmp_path, "cortex-a53")
    assert fast["dotprod"] and fast["i8mm"] and fast["fp16"]
    assert not (base["dotprod"] or base["i8mm"] or base["fp16"] or base["sve"])

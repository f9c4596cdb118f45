"""The real SmolLM2 XNNPACK exports through our CLI on the source-built ExecuTorch runtime
(``build/linux``, tools/build_binaries.py --platform linux).

There the LLM custom ops our exports call (``llama::custom_sdpa``, ``llama::update_cache``) are
ExecuTorch's own kernels from ``libcustom_ops.a``, not the host build's ``llm_custom_ops.cpp``.
They register from static initializers, so a link that drops them fails every load with
OperatorMissing: these tests load and run each variant end to end. Logit parity with
eager fp32 is in tests/parity/test_execution_parity.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rne_tools.paths import REPO_ROOT
from rne_tools.runtime.text import ChatTokenizer

pytestmark = [pytest.mark.executorch_source, pytest.mark.slow]

RNE_LLM = REPO_ROOT / "build" / "linux" / "host" / "rne_llm"
PARIS = "What is the capital of France?"


@pytest.mark.parametrize("variant", ["smollm2_fp32", "smollm2_8w", "smollm2_8da4w"])
def test_smollm2_answers_the_paris_question_on_the_source_runtime(request, variant,
                                                                   smollm2_checkpoint: Path):
    assert RNE_LLM.is_file(), (f"{RNE_LLM} is missing: run "
                               "`.venv/bin/python tools/build_binaries.py --platform linux`")
    export = request.getfixturevalue(variant)
    done = subprocess.run(
        [RNE_LLM, "--json", "--model", export.pte_path,
         "--tokenizer", smollm2_checkpoint / "tokenizer.json", PARIS],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["prompt_ids"] == ChatTokenizer(smollm2_checkpoint).user_prompt_ids(PARIS)
    assert "Paris" in out["text"], out["text"]
    assert out["stats"]["stop_reason"] == "eos"
    print(f"\nSOURCE RUNTIME {variant}: {out['text']!r}, prefill "
          f"{out['stats']['prefill_tokens_per_s']:.0f} tok/s, decode "
          f"{out['stats']['decode_tokens_per_s']:.0f} tok/s")

"""Prints the tiny Gemma 4 files of the end-to-end jest suites as JSON: a cached random Gemma 4
export with Gemma 4's vocabulary size (exported on first use, ~3 min; the same model
tools/benchmarks/multiturn_reuse_benchmark.py uses) and the Gemma-4-shaped tokenizer.json
(Gemma 3's with Gemma 4's special tokens at Gemma 4's ids). Run by globalSetup.js with the repo's
.venv python."""

import copy
import importlib.util
import json
from pathlib import Path

from rne_tools.export import cached_export
from rne_tools.models import gemma4

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def main() -> None:
    config = copy.deepcopy(gemma4.RANDOM_CONFIGS["tiny"])
    config.update(vocab_size=262144, vocab_size_per_layer_input=262144, sliding_window=64)
    pte = cached_export("gemma4_e2b", "xnnpack", "fp32", random_config=config, max_context=2048,
                        max_chunk=32, progress=False).pte_path
    spec = importlib.util.spec_from_file_location("make_gemma4_fixtures",
                                                  FIXTURES / "make_gemma4_fixtures.py")
    assert spec is not None and spec.loader is not None
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    print(json.dumps({"RNE_E2E_GEMMA4_PTE": str(pte),
                      "RNE_E2E_GEMMA4_TOKENIZER": str(fixtures.gemma4_shaped_tokenizer_json())}))


if __name__ == "__main__":
    main()

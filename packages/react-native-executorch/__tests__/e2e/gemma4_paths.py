"""Prints the tiny Gemma 4 files of the end-to-end jest suites as JSON: a cached random Gemma 4
export with Gemma 4's vocabulary size (exported on first use, ~3 min; the same model
tools/benchmarks/multiturn_reuse_benchmark.py uses), the Gemma-4-shaped tokenizer.json
(Gemma 3's with Gemma 4's special tokens at Gemma 4's ids), and a tiny multimodal Gemma 4 with
the same vocabulary: its decoder (which takes image and audio rows) and its vision and audio
encoders (~12 min on first use; the model tests/runner/test_multimodal_decoder.py checks against transformers). Run by
globalSetup.js with the repo's .venv python."""

import copy
import importlib.util
import json
from pathlib import Path

from rne_tools.encoders.audio_export import cached_audio_encoder
from rne_tools.encoders.export import cached_vision_encoder
from rne_tools.encoders.gemma4_reference import cached_checkpoint
from rne_tools.export import cached_export
from rne_tools.models import gemma4

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MULTIMODAL = "tiny_gemma4_vocab"


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
    multimodal = cached_export("gemma4_e2b", "xnnpack", "fp32",
                               checkpoint=cached_checkpoint(MULTIMODAL), max_context=512,
                               max_chunk=32, progress=False).pte_path
    vision = cached_vision_encoder(MULTIMODAL, max_soft_tokens=70, progress=False).pte_path
    audio = cached_audio_encoder(MULTIMODAL, max_seconds=4, progress=False).pte_path
    print(json.dumps({"RNE_E2E_GEMMA4_PTE": str(pte),
                      "RNE_E2E_GEMMA4_TOKENIZER": str(fixtures.gemma4_shaped_tokenizer_json()),
                      "RNE_E2E_GEMMA4_MM_PTE": str(multimodal),
                      "RNE_E2E_GEMMA4_VISION_PTE": str(vision),
                      "RNE_E2E_GEMMA4_AUDIO_PTE": str(audio)}))


if __name__ == "__main__":
    main()

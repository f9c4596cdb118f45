"""Speculative decoding with prompt lookup on the real SmolLM2-135M-Instruct (8da4w, the shipping
XNNPACK variant, exported with a ``verify`` method), through ``rne_llm``: the same tokens as
plain decoding for copy-heavy prompts, under a JSON schema and across a stop string, with drafts
actually accepted. The tiny-model tests of the loop (flat and ring caches, the sampling
distribution, refusals) are C++: ``ctest -R Speculative`` (cpp/tests/speculative_test.cpp).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from rne_tools.export import ExportResult

ARTICLE = (
    "The river Wen rises in the hills above Marlow and runs forty miles to the sea. In 1852 the "
    "town built a stone bridge with five arches, which still carries the main road. The bridge "
    "was widened in 1931 and repaired after the flood of 1968, when the water rose eleven feet "
    "in a single night. Today the river is known for its trout and for the annual boat race "
    "between the rowing clubs of Marlow and Ashby, held on the first Saturday of June."
)
# Short enough that the 135M model repeats it nearly verbatim (the whole article it paraphrases).
TO_REPEAT = (
    "Repeat this text word for word: The river Wen rises in the hills above Marlow and runs "
    "forty miles to the sea. In 1852 the town built a stone bridge with five arches, which still "
    "carries the main road."
)


def run(rne_llm: Path, export: ExportResult, checkpoint: Path, *args: str) -> dict:
    done = subprocess.run(
        [rne_llm, "--json", "--model", str(export.pte_path), "--tokenizer",
         str(checkpoint / "tokenizer.json"), "--seed", "0", *args],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def both(rne_llm: Path, export: ExportResult, checkpoint: Path, *args: str) -> tuple[dict, dict]:
    plain = run(rne_llm, export, checkpoint, *args)
    fast = run(rne_llm, export, checkpoint, "--speculative", "prompt-lookup", *args)
    return plain, fast


def test_copying_prompt_gives_the_same_tokens_with_fewer_forwards(
    rne_llm, smollm2_8da4w, smollm2_checkpoint
):
    plain, fast = both(rne_llm, smollm2_8da4w, smollm2_checkpoint, "--max-new-tokens", "80",
                       TO_REPEAT)
    assert fast["tokens"] == plain["tokens"]
    stats = fast["stats"]
    assert plain["stats"]["drafted_tokens"] == 0
    # Copying, a good share of the drafts are the model's own tokens, and a forward call yields
    # two tokens or more on average.
    assert stats["accepted_tokens"] > stats["drafted_tokens"] / 4, stats
    assert stats["decode_forwards"] < (stats["generated_tokens"] - 1) / 2, stats


def test_sampled_text_is_the_same_for_the_same_seed(rne_llm, smollm2_8da4w, smollm2_checkpoint):
    # One draw per kept token, from the same logits: the seed decides the same tokens.
    plain, fast = both(rne_llm, smollm2_8da4w, smollm2_checkpoint, "--max-new-tokens", "60",
                       "--temperature", "0.7", "--top-p", "0.9",
                       f"Summarise in two sentences: {ARTICLE}")
    assert fast["tokens"] == plain["tokens"]
    assert fast["stats"]["drafted_tokens"] > 0


def test_json_schema_constrains_drafted_tokens(rne_llm, smollm2_8da4w, smollm2_checkpoint,
                                               tmp_path):
    schema = tmp_path / "bridge.json"
    schema.write_text(json.dumps({
        "type": "object",
        "properties": {"river": {"type": "string"}, "bridge_built": {"type": "integer"},
                       "flood_year": {"type": "integer"}},
        "required": ["river", "bridge_built", "flood_year"],
        "additionalProperties": False,
    }))
    plain, fast = both(rne_llm, smollm2_8da4w, smollm2_checkpoint, "--json-schema", str(schema),
                       "--max-new-tokens", "60",
                       f"{ARTICLE}\nExtract the river, the year the bridge was built and the "
                       "year of the flood as JSON.")
    assert fast["tokens"] == plain["tokens"]
    json.loads(fast["text"])
    assert fast["stats"]["drafted_tokens"] > 0


def test_a_stop_string_inside_a_draft_stops_at_the_same_place(rne_llm, smollm2_8da4w,
                                                                smollm2_checkpoint):
    plain, fast = both(rne_llm, smollm2_8da4w, smollm2_checkpoint, "--max-new-tokens", "80",
                       "--stop", "five arches", TO_REPEAT)
    assert plain["stats"]["stop_reason"] == "stop_string", plain["text"]
    assert fast["text"] == plain["text"]
    assert fast["stats"]["stop_reason"] == "stop_string"
    assert fast["stats"]["accepted_tokens"] > 0


def test_a_program_without_verify_names_the_re_export(rne_llm, smollm2_8w, smollm2_checkpoint):
    done = subprocess.run(
        [rne_llm, "--model", str(smollm2_8w.pte_path), "--tokenizer",
         str(smollm2_checkpoint / "tokenizer.json"), "--speculative", "prompt-lookup", "hi"],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode != 0
    assert "--verify-tokens" in done.stderr, done.stderr[-2000:]

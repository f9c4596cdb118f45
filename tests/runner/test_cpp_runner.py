"""The C++ runner (rne_llm, built from packages/react-native-executorch/cpp) on real exports.

- its greedy tokens equal the Python reference runner's (rne_tools.checks.runner) on the same fp32
  file, and its logits stay within fp16 rounding of them on a file with an fp16 KV cache,
- tiny Gemma 4 on XNNPACK (LLM custom ops on its full-attention layers) gives the reference
  runtime's logits,
- the real SmolLM2 answers the Paris question through the chat template and the C++ tokenizer,
- bad inputs fail with messages that name the problem.

The binary comes from the canonical host build (build/host); it is configured and built with
the commands of packages/react-native-executorch/cpp/README.md when missing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

PARIS = "What is the capital of France?"


def run_json(binary: Path, *args: str) -> dict:
    done = subprocess.run([binary, "--json", *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def reference_greedy(pte: Path, prompt: list[int], max_new_tokens: int) -> list[int]:
    from rne_tools.checks.runner import PteRunner

    return PteRunner(pte).generate(prompt, max_new_tokens, stop_at_eos=False).tokens


def test_greedy_tokens_equal_the_reference_runner_on_a_tiny_export(
    rne_llm, byte_tokenizer, tiny_llama_fp32
):
    export = tiny_llama_fp32
    # 37 tokens: two full chunks of 16 and a partial one, then decode past the context middle.
    prompt = [(i * 37 + 11) % 256 for i in range(37)]
    ours = run_json(rne_llm, "--model", str(export.pte_path), "--tokenizer", str(byte_tokenizer),
                    "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", "24",
                    "--ignore-eos")
    assert ours["max_chunk"] == 16 and ours["prompt_ids"] == prompt
    assert ours["stats"]["generated_tokens"] == 24
    assert ours["tokens"] == reference_greedy(export.pte_path, prompt, 24)


def host_vs_reference(binary: Path, pte: Path, tokens: list[int], chunks: list[int]):
    """Teacher-forced logits of the host build (``binary``, rne_logits) and of the reference
    runtime on the same tokens, fed in the same chunks."""
    from rne_tools.checks.cpp_runtime import forward_logits
    from rne_tools.checks.parity import Parity, reference_runtime_logits

    return Parity(forward_logits(pte, tokens, chunks, binary=binary),
                  reference_runtime_logits(pte, tokens, chunks), None)


def assert_equal_to_float_rounding(parity, label: str) -> None:
    """fp32 caches and weights: the runtimes agree to 1e-3 of the logit std, top-1 everywhere."""
    bound = 1e-3 * parity.eager.std()
    print(f"\n{label} host vs reference: max|dlogit| {parity.diff.max():.2e}, "
          f"logit std {parity.eager.std():.3f}")
    assert parity.diff.max() <= bound
    assert parity.agreement.all()


# A quantized export keeps its KV cache in fp16, so each runtime rounds the attention output to
# fp16 in its own kernel: the host's (llm_custom_ops.cpp) and the wheel's differ by an fp16 ulp
# here and there, which the tiny random model's int8 dynamic activations amplify. Measured on
# tiny_llama_8da4w: max |dlogit| 0.063-0.079 at logit std 1.0, top-1 equal at 24-26 of 26 forwards
# (the others near-ties, margins < 0.01). A wrong attention (positions, causal limit, cache
# rows) moves the logits by about their std. So teacher-forced logits are compared, bounded.
FP16_CACHE_BOUND_PER_STD = 0.15


def test_logits_match_the_reference_runner_on_a_tiny_fp16_cache_export(
    rne_logits_host, tiny_llama_8da4w
):
    from rne_tools.checks.parity import random_tokens

    export = tiny_llama_8da4w
    assert export.report["kv_cache_dtype"] == "float16"
    tokens = random_tokens(export.report["vocab_size"], 60, seed=5)
    chunks = [16, 16, 5] + [1] * 23  # prefill chunks, then decode past the context middle
    parity = host_vs_reference(rne_logits_host, export.pte_path, tokens, chunks)
    bound = FP16_CACHE_BOUND_PER_STD * parity.eager.std()
    diff, agree, decisive = parity.diff, parity.agreement, parity.decisive(bound)
    print(f"\nFP16 CACHE host vs reference: max|dlogit| {diff.max():.4f}, logit std "
          f"{parity.eager.std():.3f}, top-1 equal {agree.sum()}/{len(chunks)}, "
          f"decisive {decisive.sum()}")
    assert diff.max() <= bound, f"forward {diff.argmax()} differs by {diff.max():.4f} > {bound:.4f}"
    assert agree[decisive].all()


def test_gemma4_xnnpack_logits_match_the_reference_runner(rne_logits_host):
    """Tiny Gemma 4 on XNNPACK through the host's runtime: its full-attention layers run the
    host's ``llama::update_cache`` / ``llama::custom_sdpa`` (eight query heads per kv head, the
    model's own scale, KV-shared layers attending from the last position), its sliding layers
    the ring caches. fp32 throughout, so the two runtimes agree to float rounding."""
    from rne_tools.checks.parity import random_tokens
    from rne_tools.export import cached_export

    export = cached_export("gemma4_e2b", "xnnpack", "fp32", progress=False,
                           random_config="tiny", max_context=64, max_chunk=5)
    tokens = random_tokens(export.report["vocab_size"], 40, seed=3)
    chunks = [5, 3, 5, 4, 5, 2, 5] + [1] * 11  # past the sliding window, then decode
    assert_equal_to_float_rounding(
        host_vs_reference(rne_logits_host, export.pte_path, tokens, chunks), "GEMMA 4 XNNPACK")


@pytest.mark.slow
def test_smollm2_logits_match_the_reference_runner_at_a_long_context(rne_logits_host,
                                                                     smollm2_fp32):
    """Past 4,096 key reads per step (9 heads x 455+ keys) the host's custom_sdpa splits the
    keys into spans across the thread pool and merges their softmax sums: 64-token prefill
    chunks (a causal limit per row inside each span) up to 700 tokens, then decode steps. fp32
    cache and weights, so the host and the reference runtime agree to float rounding."""
    from rne_tools.checks.parity import random_tokens

    export = smollm2_fp32
    tokens = random_tokens(export.report["vocab_size"], 706, seed=11)
    chunks = [64] * 10 + [60] + [1] * 6
    assert_equal_to_float_rounding(
        host_vs_reference(rne_logits_host, export.pte_path, tokens, chunks),
        "SMOLLM2 LONG CONTEXT")


@pytest.mark.slow
def test_greedy_tokens_equal_the_reference_runner_on_smollm2(rne_llm, smollm2_fp32,
                                                             smollm2_checkpoint):
    from rne_tools.runtime.text import ChatTokenizer

    prompt = ChatTokenizer(smollm2_checkpoint).user_prompt_ids("Name three colours.")
    ours = run_json(rne_llm, "--model", str(smollm2_fp32.pte_path),
                    "--tokenizer", str(smollm2_checkpoint / "tokenizer.json"),
                    "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", "32",
                    "--ignore-eos")
    assert ours["tokens"] == reference_greedy(smollm2_fp32.pte_path, prompt, 32)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["smollm2_8w", "smollm2_8da4w", "smollm2_fp32"])
def test_smollm2_answers_the_paris_question(request, variant, rne_llm, smollm2_checkpoint):
    from rne_tools.runtime.text import ChatTokenizer

    export = request.getfixturevalue(variant)
    out = run_json(rne_llm, "--model", str(export.pte_path),
                   "--tokenizer", str(smollm2_checkpoint / "tokenizer.json"), PARIS)
    # The C++ chat formatter + tokenizer produce exactly the ids of HF's apply_chat_template.
    assert out["chat_template"] == str(smollm2_checkpoint / "tokenizer_config.json")
    assert out["prompt_ids"] == ChatTokenizer(smollm2_checkpoint).user_prompt_ids(PARIS)
    assert "Paris" in out["text"], out["text"]
    assert out["stats"]["stop_reason"] == "eos"
    assert out["stats"]["decode_tokens_per_s"] > 0 and out["stats"]["prefill_tokens_per_s"] > 0


def test_streamed_text_and_stats_go_to_the_terminal(rne_llm, tiny_llama_fp32, byte_tokenizer):
    done = subprocess.run(
        [rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer, "--raw",
         "--max-new-tokens", "5", "--ignore-eos", "hello"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "prefill" in done.stderr and "decode" in done.stderr and "stop: max_new_tokens" in done.stderr


def _cli_error(rne_llm: Path, *args: str) -> str:
    done = subprocess.run([rne_llm, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout
    return done.stderr


def test_missing_and_non_pte_model_files_are_named(rne_llm, byte_tokenizer, tmp_path):
    missing = tmp_path / "absent.pte"
    assert f"{missing}: no such file" in _cli_error(
        rne_llm, "--model", missing, "--tokenizer", byte_tokenizer, "--raw", "hi")
    junk = tmp_path / "junk.pte"
    junk.write_text("not a flatbuffer at all")
    assert "not an ExecuTorch program" in _cli_error(
        rne_llm, "--model", junk, "--tokenizer", byte_tokenizer, "--raw", "hi")


def test_a_tokenizer_from_another_model_is_refused(rne_llm, tiny_llama_fp32, smollm2_checkpoint):
    err = _cli_error(rne_llm, "--model", tiny_llama_fp32.pte_path,
                     "--tokenizer", smollm2_checkpoint / "tokenizer.json", "--raw", "hi")
    assert "different models" in err


def test_a_pte_without_the_contract_methods_is_refused(rne_llm, byte_tokenizer, tmp_path):
    import torch
    from executorch.exir import to_edge_transform_and_lower

    class NoContract(torch.nn.Module):
        def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
            return torch.zeros(1, 256) + tokens.sum() + input_pos

    program = torch.export.export(
        NoContract(), (torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, dtype=torch.long)))
    pte = tmp_path / "no_contract.pte"
    pte.write_bytes(to_edge_transform_and_lower(program).to_executorch().buffer)
    err = _cli_error(rne_llm, "--model", pte, "--tokenizer", byte_tokenizer, "--raw", "hi")
    assert "get_max_context_len" in err and "tools/export_model.py" in err


def test_bad_options_say_what_is_wrong(rne_llm, tiny_llama_fp32, byte_tokenizer):
    base = ["--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer, "--raw"]
    assert "top_p" in _cli_error(rne_llm, *base, "--top-p", "2", "hi")
    assert "--temperature expects a number" in _cli_error(rne_llm, *base, "--temperature", "hot", "hi")
    assert "positions" in _cli_error(rne_llm, *base, "x" * 100)  # 100 bytes > 64 positions


def test_streamed_pieces_are_always_whole_utf8_characters(rne_llm, tiny_llama_fp32,
                                                          byte_tokenizer):
    # With a byte-level vocabulary every token is one byte, so sampled output is full of
    # multi-byte sequences cut across tokens, and of invalid ones.
    args = [rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer, "--raw",
            "--temperature", "1.5", "--seed", "7", "--max-new-tokens", "50", "--ignore-eos",
            "Zażółć 東京 😀"]
    streamed = subprocess.run(args, capture_output=True, timeout=120)
    assert streamed.returncode == 0, streamed.stderr
    text = streamed.stdout.decode("utf-8")  # strict: a split character would raise here
    as_json = run_json(*args)
    assert text == as_json["text"]
    # 22 prompt bytes in a 64-position cache: the budget stops at the context end, not at 50.
    assert len(as_json["tokens"]) == 64 - len(as_json["prompt_ids"]) == 42
    assert as_json["stats"]["stop_reason"] == "context_full"


def test_a_stop_string_ends_the_answer_right_before_it(rne_llm, tiny_llama_fp32, byte_tokenizer):
    args = [rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer, "--raw",
            "--max-new-tokens", "30", "--ignore-eos", "abc"]
    full = run_json(*args)["text"]
    assert len(full) >= 12, full
    stop = full[8:11]  # somewhere inside the greedy answer
    cut = run_json(*args, "--stop", stop)
    assert cut["text"] == full[: full.find(stop)]
    assert cut["stats"]["stop_reason"] == "stop_string"
    assert cut["stats"]["generated_tokens"] < 30


def test_tables_stay_mapped_and_only_looked_up_rows_become_resident(rne_bench, smollm2_8w):
    """The loader locks the program and the delegate data until XNNPACK has packed it, but
    leaves the constant segment (here SmolLM2's 8-bit embedding table, 30 MB, looked up on the
    CPU) mapped: after a 16-token prompt only the rows read are resident. Locking it, as the
    loader once did, makes the whole table resident for the program's life."""
    from rne_tools.pte_parts import evict_from_page_cache, pte_parts

    pte = smollm2_8w.pte_path
    parts = pte_parts(pte)
    table = parts.constant
    assert table > 25e6, table  # the table is there to be measured
    evict_from_page_cache(pte)  # cached large folios would map megabytes per lookup
    done = subprocess.run([rne_bench, "--model", pte, "--memory", "1", "--prompt-tokens", "16",
                           "--new-tokens", "4"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    resident = json.loads(done.stdout)["resident"]
    # Pages of mapped files beyond the binary's own (its libraries, before the load): the model
    # file's. Measured: 6 MiB (the program, and 20 lookups), 33 MiB with the table locked.
    model_mib = max(resident[p]["file_mb"] for p in ("load", "prefill", "decode")) \
        - resident["start"]["file_mb"]
    assert model_mib * 2**20 < table / 2, (model_mib, table)
    # The packed weights are the process's own memory: its anonymous pages hold the linears.
    assert resident["decode"]["anon_mb"] * 2**20 > parts.delegate / 2, resident

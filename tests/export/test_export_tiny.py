"""End-to-end export of tiny random configs: contract, report, verification, runner."""

import copy
import json

import pytest
import torch

from rne_tools.checkpoints import random_model
from rne_tools.checks.eager import greedy
from rne_tools.checks.runner import PteRunner
from rne_tools.export import cached_export
from rne_tools.export.backends import BACKEND_CODES
from rne_tools.export.backends.xnnpack_ops import apply_xnnpack_transforms
from rne_tools.models import gemma4


def _eager():
    model, _, _ = random_model("llama", "tiny", max_context=64, max_chunk=16)
    return model


def test_fp32_contract_and_report(tiny_llama_fp32):
    result = tiny_llama_fp32
    runner = PteRunner(result.pte_path)
    info = runner.info
    # max_chunk comes from the forward method's metadata (the dynamic bound), not a constant.
    assert info.max_chunk == 16
    assert info.constants["get_max_seq_len"] == 16
    assert info.max_context == 64
    assert info.vocab_size == 256
    assert info.bos_id == 1 and info.eos_ids == (2,)
    assert info.backend_code == BACKEND_CODES["xnnpack"]
    assert info.constants["use_kv_cache"] is True
    assert info.constants["enable_dynamic_shape"] is True
    from executorch.runtime import Runtime

    ring = Runtime.get().load_program(result.pte_path).load_method("get_kv_ring_size")
    assert ring.execute([]) == [0]  # Llama: flat caches, rewindable anywhere

    report = json.loads(result.report_path.read_text())
    assert result.pte_path.name == "smollm2_135m_xnnpack_fp32.pte"
    assert result.report_path.name == "smollm2_135m_xnnpack_fp32.report.json"
    assert report["size"] == result.pte_path.stat().st_size
    import hashlib

    assert report["sha256"] == hashlib.sha256(result.pte_path.read_bytes()).hexdigest()
    assert report["verification"]["passed"] is True
    assert report["verification"]["matching_tokens"] == report["verification"]["generated_tokens"]
    assert report["verification"]["max_abs_logit_diff"] < 1e-3
    delegation = report["delegation"]
    assert 0.5 < delegation["delegated_share"] <= 1.0
    # Linears and norms are delegated; only glue and the custom attention op stay on the CPU.
    assert not any("linear" in op or "mm" in op for op in delegation["cpu_ops"])
    assert report["peak_rss_bytes"] > 0 and report["export_seconds"] > 0


def test_runtime_matches_eager_for_every_chunk_length(tiny_llama_fp32):
    """Prefill with each T in 1..max_chunk, then decode: logits match the eager model."""
    runner = PteRunner(tiny_llama_fp32.pte_path)
    model = _eager()
    g = torch.Generator().manual_seed(7)
    for t in (1, 5, 16):
        prompt = torch.randint(0, 256, (1, t), generator=g)
        ours = runner.forward(prompt[0].tolist(), 3)
        with torch.no_grad():
            expected = model(prompt, torch.tensor([3]))
        torch.testing.assert_close(ours, expected, atol=1e-4, rtol=0)


def test_chunked_prefill_equals_one_token_at_a_time(tiny_llama_fp32):
    runner = PteRunner(tiny_llama_fp32.pte_path)
    prompt = list(range(3, 40))
    chunked = runner.prefill(prompt)
    step = None
    for i, token in enumerate(prompt):
        step = runner.forward([token], i)
    torch.testing.assert_close(chunked, step, atol=1e-4, rtol=0)


def test_generation_budget_is_bounded_by_cache_not_chunk(tiny_llama_fp32):
    runner = PteRunner(tiny_llama_fp32.pte_path)
    out = runner.generate(list(range(3, 23)), max_new_tokens=1000, stop_at_eos=False)
    assert len(out.tokens) == 64 - 20  # the KV capacity left, not ~max_chunk
    out = runner.generate(list(range(3, 23)), max_new_tokens=5, stop_at_eos=False)
    assert len(out.tokens) == 5


def test_backend_transforms_preserve_eager_outputs():
    base = _eager()
    swapped = _eager()
    apply_xnnpack_transforms(swapped)
    prompt = list(range(5, 45))

    def step(model):
        return lambda tokens, pos: model(torch.tensor([list(tokens)]), torch.tensor([pos]))

    with torch.no_grad():
        a_tokens, a_logits = greedy(step(base), prompt, 16, 8)
        b_tokens, b_logits = greedy(step(swapped), prompt, 16, 8)
    assert a_tokens == b_tokens
    torch.testing.assert_close(torch.stack(a_logits), torch.stack(b_logits), atol=1e-4, rtol=0)


@pytest.mark.parametrize("config", sorted(gemma4.RANDOM_CONFIGS))
def test_gemma4_xnnpack_rewrites_preserve_eager_outputs(config):
    """RMSNorm over a 4-D view, rotate-half as a linear, grouped-query heads folded into the
    query rows (with an additive mask), full-attention layers on in-place caches and the causal
    custom SDPA, and the tanh GELU through a sigmoid give Gemma 4's own logits, in prefill
    chunks that cross the sliding window and in decode."""
    args = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS[config])
    base = gemma4.Transformer(args, max_context=64, max_chunk=8).init_random(0).eval()
    swapped = copy.deepcopy(base)
    apply_xnnpack_transforms(swapped)
    kinds = {type(m).__name__ for m in swapped.modules()}
    assert {
        "FourDimRMSNorm", "MatmulRotateHalf", "FoldedGqaSDPA", "SigmoidGeluTanh",
        "InPlaceKVCache", "CustomOpCausalSDPA",
    } <= kinds
    assert not {"RMSNorm", "RotateHalf", "MatmulSDPA", "GeluTanh"} & kinds
    tokens = torch.randint(0, args.vocab_size, (1, 40), generator=torch.Generator().manual_seed(1))
    pos = 0
    with torch.no_grad():
        for n in (8, 3, 8, 8, 5, 1, 1, 1):
            chunk, at = tokens[:, pos:pos + n], torch.tensor([pos])
            torch.testing.assert_close(swapped(chunk, at), base(chunk, at), atol=1e-4, rtol=0)
            pos += n


def test_gemma4_xnnpack_norms_and_attention_run_in_xnnpack():
    """The Gemma 4 rewrites keep RMSNorm (mean over the last dim), the masked attention and its
    grouped-query heads out of the portable CPU ops: each split its layer's delegate, and the
    heads' expand copied the whole cache per query head. Full-attention caches are written in
    place (a functional write copies the whole cache twice); only the sliding layers' small
    rings are still written with ``index_put``."""
    result = cached_export("gemma4_e2b", "xnnpack", "fp32", progress=False,
                           random_config="tiny", max_context=64, max_chunk=5)
    assert result.report["verification"]["passed"] is True
    cpu_ops = result.report["delegation"]["cpu_ops"]
    assert not {"aten_mean_dim", "aten_where_self", "aten_expand_copy_default"} & set(cpu_ops), \
        cpu_ops
    args = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS["tiny"])
    full = [t == gemma4.FULL for t in args.layer_types]
    own = [i for i in range(args.n_layers) if args.kv_source[i] == i]
    assert cpu_ops.get("update_cache") == 2 * sum(full[i] for i in own), cpu_ops
    assert cpu_ops.get("aten_index_put_default") == 2 * sum(not full[i] for i in own), cpu_ops
    assert cpu_ops.get("llama_custom_sdpa_default") == sum(full), cpu_ops


@pytest.mark.parametrize("fixture", ["tiny_llama_8da4w", "tiny_llama_8da4w_emb4"])
def test_8da4w_exports_verify_and_shrink(fixture, tiny_llama_fp32, request):
    result = request.getfixturevalue(fixture)
    report = result.report
    assert report["quantization"] == "8da4w"
    assert report["embedding_quantization"] == ("4w" if fixture.endswith("emb4") else "8w")
    assert report["verification"]["passed"] is True
    assert report["size"] < tiny_llama_fp32.report["size"] / 2
    # The quantized embedding runs as a fused quantized kernel, not as dequantize + embedding.
    assert "aten_embedding_default" not in report["delegation"]["cpu_ops"]
    runner = PteRunner(result.pte_path)
    assert runner.info.max_chunk == 16


def test_8da8w_export_verifies_and_every_linear_runs_in_xnnpack(tiny_llama_fp32, tiny_llama_8da4w):
    result = cached_export("smollm2_135m", "xnnpack", "8da8w", progress=False,
                           random_config="tiny", max_context=64, max_chunk=16)
    report = result.report
    assert report["quantization"] == "8da8w" and report["verification"]["passed"] is True
    # int8 per-channel weights: between the 4-bit and the float file.
    assert tiny_llama_8da4w.report["size"] < report["size"] < tiny_llama_fp32.report["size"] / 2
    cpu_ops = report["delegation"]["cpu_ops"]
    assert not any("linear" in op or "mm" in op for op in cpu_ops), cpu_ops


def test_8w_export_verifies_and_every_linear_runs_in_xnnpack(
    tiny_llama_8w, tiny_llama_fp32, tiny_llama_8da4w
):
    """Weight-only int8 linears run as XNNPACK f32-qc8w kernels: none is left to the portable
    runtime, which would dequantize the weights on every call."""
    report = tiny_llama_8w.report
    assert report["quantization"] == "8w" and report["verification"]["passed"] is True
    assert report["verification"]["max_abs_logit_diff"] < 0.05  # float activations: near fp32
    assert tiny_llama_8da4w.report["size"] < report["size"] < tiny_llama_fp32.report["size"] / 2
    cpu_ops = report["delegation"]["cpu_ops"]
    assert not any("linear" in op or "mm" in op or "dequantize" in op for op in cpu_ops), cpu_ops


def test_cli_cached_returns_the_shared_export(tiny_llama_fp32, tmp_path):
    """CMake/ctest fixtures and the demo get the same cached file through the CLI."""
    import subprocess
    import sys

    from rne_tools.paths import REPO_ROOT

    proc = subprocess.run(
        [
            sys.executable,
            "tools/export_model.py",
            "--model",
            "smollm2_135m",
            "--quantization",
            "fp32",
            "--random-config",
            "tiny",
            "--max-context",
            "64",
            "--max-chunk",
            "16",
            "--cached",
            "--quiet",
            "--output-dir",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.strip().splitlines()[-1] == str(tiny_llama_fp32.pte_path)
    assert (
        tmp_path / tiny_llama_fp32.pte_path.name
    ).read_bytes() == tiny_llama_fp32.pte_path.read_bytes()
    assert (tmp_path / tiny_llama_fp32.report_path.name).is_file()

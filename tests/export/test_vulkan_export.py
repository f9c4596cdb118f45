"""Vulkan variants of Gemma 4 and Llama (SmolLM2): transform numerics and lowering.

Checked here: the source-transformed model (Vulkan custom ops through their reference
implementations) computes what the original computes, and the lowered program delegates at
least 95% of compute ops with every RMSNorm, SDPA and cache update inside the Vulkan delegate.
"""

import pytest

from rne_tools.checkpoints import random_model
from rne_tools.checks import cpp_runtime
from rne_tools.checks.transform import check_transform
from rne_tools.errors import ExportError
from rne_tools.export import cached_export, export_llm
from rne_tools.export.backends import ExportOptions, vulkan_ops
from rne_tools.export.backends.vulkan import BACKEND
from rne_tools.export.backends.vulkan_ops import (
    VulkanKVCache,
    VulkanRMSNorm,
    VulkanSDPA,
    apply_vulkan_transforms,
)
from rne_tools.export.custom_ops import CustomOpCausalSDPA, InPlaceKVCache
from rne_tools.export.tied_head import TiedHead4bit
from rne_tools.models import gemma4, layers, llama
from rne_tools.pte_parts import vulkan_constants
from rne_tools.pte_parts import vulkan_ops as delegate_ops


def _variant(config, quantization, embedding_quantization=None):
    return cached_export(
        "gemma4_e2b",
        "vulkan",
        quantization,
        random_config=config,
        max_context=64,
        max_chunk=5,
        progress=False,
        # The tiny model's width (64) takes groups of 32, not the registry's 128.
        **(dict(embedding_quantization=embedding_quantization, group_size=32)
           if embedding_quantization else {}),
    )


@pytest.mark.parametrize("name", sorted(gemma4.RANDOM_CONFIGS))
def test_transformed_model_matches_original(name):
    model, args, _ = random_model("gemma4", name, max_context=40, max_chunk=4, seed=5)
    n_norms = sum(isinstance(m, layers.RMSNorm) for m in model.modules())
    _, check = check_transform(model, apply_vulkan_transforms, atol=1e-3)
    assert check["greedy_tokens_match"] and check["max_abs_logit_diff"] < 1e-3
    assert check["prompt_tokens"] > args.sliding_window
    # Every norm form (weighted, weightless v_norm) and every attention is swapped; sliding
    # layers attend over a window-sized span. Caches are flat; a sliding one has window - 1
    # leading slots that are never written. Shared layers own none.
    assert sum(isinstance(m, VulkanRMSNorm) for m in model.modules()) == n_norms
    sliding = [t == gemma4.SLIDING for t in args.layer_types]
    windows = [layer.attention.sdpa.window for layer in model.layers]
    assert all(isinstance(layer.attention.sdpa, VulkanSDPA) for layer in model.layers)
    assert windows == [args.sliding_window if s else None for s in sliding]
    own_kv = [i for i in range(args.n_layers) if args.kv_source[i] == i]
    assert sorted(model.caches, key=int) == [str(i) for i in own_kv]
    for key, cache in model.caches.items():
        pad = args.sliding_window - 1 if sliding[int(key)] else 0
        assert isinstance(cache, VulkanKVCache) and cache.size == 40 + pad + 4 - 1


# Every table is looked up on the CPU, by the kernel its quantization needs: 4-bit tables keep
# fp16 group scales and answer float32 rows (``embedding_4bit.dtype``).
TABLE_OPS = {None: "aten_embedding_default", "4w": "quantized_decomposed_embedding_4bit_dtype",
             "8w": "quantized_decomposed_embedding_byte_default"}


@pytest.mark.parametrize("config, quantization, tables", [("tiny", "8da4w", "4w"),
                                                          ("tiny", "8da4w", "8w"),
                                                          ("tiny_mqa", "fp16", None)])
def test_export_delegates_norms_attention_and_caches(config, quantization, tables):
    result = _variant(config, quantization, tables)
    report = result.report
    args = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS[config])
    own_kv = sum(1 for i in range(args.n_layers) if args.kv_source[i] == i)
    checks = report["backend_checks"]
    assert checks["compute_ops_delegated_share"] >= 0.95
    fused = checks["fused_ops"]
    n_norms = 5 * args.n_layers + args.n_layers + 2 * own_kv + 2
    assert fused["et_vk_rms_norm_default"] == {"delegated": n_norms, "cpu": 0}
    assert fused["et_vk_sdpa_default"] == {"delegated": args.n_layers, "cpu": 0}
    assert fused["auto_functionalized_v2"] == {"delegated": 2 * own_kv, "cpu": 0}
    assert checks["transform_check"]["greedy_tokens_match"]
    assert sorted(checks["host_tables"]) == ["ple_embeddings", "tok_embeddings"]
    assert checks["ops_on_cpu"].get(TABLE_OPS[tables]) == 2
    # With 4-bit tables the tied head reads the packed token table on the CPU; otherwise it is
    # a linear in the delegate.
    assert checks["ops_on_cpu"].get("rne_tied_head_4bit_default", 0) == (tables == "4w")
    # Executed where a source-built runtime with the backend existed at export time
    # (tools/build_binaries.py --platform linux); never a mismatch.
    verification = report["verification"]
    assert verification["status"] in ("unavailable", "executed")
    if verification["status"] == "executed":
        # Judged against the eager model run in fp16, the precision the delegate computes in.
        assert verification["precision_reference"]["dtype"] == "float16"
        assert verification["agreement"] >= verification["required_agreement"] >= 0.25


def test_the_delegate_stores_its_caches_empty():
    """The delegate owns the caches and stores their initial contents: every one is zero (the
    export ran the model eagerly before lowering), so caches of one shape share their bytes."""
    result = _variant("tiny", "8da4w", "4w")
    args = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS["tiny"])
    own_kv = sum(1 for i in range(args.n_layers) if args.kv_source[i] == i)
    caches = [c for c in vulkan_constants(result.pte_path) if len(c.dims) == 4]
    assert len(caches) == 2 * own_kv and all(c.dtype == "FLOAT16" for c in caches)
    with result.pte_path.open("rb") as f:
        for cache in caches:
            f.seek(cache.offset)
            assert not any(f.read(cache.length)), f"cache {cache.dims} holds data"
    assert len({c.key for c in caches}) == len({c.dims for c in caches})


def test_caches_past_the_texture_limits_are_not_copied_each_forward():
    """A cache over 2,048 slots (ExecuTorch's texture limit along the packed depth) lives in a
    buffer, where ``update_cache`` writes it; the slice that takes the attended span out of it
    must read it there. Its layout pass used to put a copy of each whole cache into a texture
    before that slice on every forward, so decode cost and memory followed ``max_context``."""
    result = cached_export("gemma4_e2b", "vulkan", "fp16", random_config="tiny",
                           max_context=2100, max_chunk=8, progress=False)
    ops = delegate_ops(result.pte_path)
    caches = {op.ids[1]: op.tensors[1] for op in ops if op.name == "update_cache.default"}
    assert caches and all(dims[1] > 2048 for dims in caches.values())
    copies = [op for op in ops if op.ids and op.ids[0] in caches and op.name != "update_cache.default"
              and op.name != "aten.slice_copy.Tensor"]
    assert not copies, f"whole caches copied each forward: {[(c.name, c.tensors[0]) for c in copies]}"
    # Each cache is read by slices alone, which take the span.
    assert all(any(op.name == "aten.slice_copy.Tensor" and op.ids[0] == cache for op in ops)
               for cache in caches)


def _quantized_for_vulkan(monkeypatch, tables, group_size=32):
    """The tiny Gemma 4 through the Vulkan backend's transform and quantization, under a 16 KiB
    storage buffer (the head's fp16 weight, 512 x 64, is 64 KiB)."""
    monkeypatch.setattr(vulkan_ops, "STORAGE_BUFFER_BYTES", 16 * 1024)
    model, _, _ = random_model("gemma4", "tiny", max_context=40, max_chunk=4, seed=5)
    options = ExportOptions("gemma4_e2b", "gemma4", "vulkan", "8da4w", 40, 4,
                            embedding_quantization=tables, group_size=group_size)
    model = BACKEND.transform(model, options).model
    return BACKEND.quantize(model, options)


def test_a_head_reading_the_token_table_is_not_sharded(monkeypatch):
    """E2B's head exceeds one storage buffer; sharded, each shard would be a 4-bit linear of its
    own, a second copy of the table. With 4-bit tables the head reads the table on the CPU, so
    only the other wide linears are sharded."""
    model = _quantized_for_vulkan(monkeypatch, "4w")
    assert isinstance(model.output, TiedHead4bit)
    assert model.output._table[0] is model.tok_embeddings
    assert "output" not in model.sharded_linears
    assert any(".feed_forward." in name for name in model.sharded_linears)
    assert sorted(model.host_tables) == ["ple_embeddings", "tok_embeddings"]
    # 8-bit tables: the head is a linear, sharded like the others.
    model = _quantized_for_vulkan(monkeypatch, "8w")
    assert "output" in model.sharded_linears


def test_a_whole_head_its_table_cannot_serve_is_refused(monkeypatch):
    """A group the packed table cannot take (not a multiple of 32) leaves the head a linear over
    one storage buffer: refused at export, not at load on a phone."""
    with pytest.raises(ExportError, match=r"output exceed one storage buffer .* multiple of 32"):
        _quantized_for_vulkan(monkeypatch, "4w", group_size=16)


def test_refuses_a_quantization_it_cannot_honour(tmp_path):
    options = dict(random_config="tiny", max_context=64, max_chunk=5, quantization="int4")
    with pytest.raises(ExportError, match=r"allowed: fp16, 8da4w"):
        export_llm("gemma4_e2b", "vulkan", tmp_path, progress=False, **options)
    assert list(tmp_path.iterdir()) == []


def test_llama_transform_matches_original_and_uses_the_vulkan_ops():
    model, _, _ = random_model("llama", "tiny", max_context=40, max_chunk=4, seed=5)
    n_norms = sum(isinstance(m, layers.RMSNorm) for m in model.modules())
    model, check = check_transform(model, apply_vulkan_transforms, atol=1e-3)
    assert check["greedy_tokens_match"] and check["max_abs_logit_diff"] < 1e-3
    assert sum(isinstance(m, VulkanRMSNorm) for m in model.modules()) == n_norms
    # Every layer attends fully over its own cache: the custom ops Vulkan fuses.
    for layer in model.layers:
        assert isinstance(layer.self_attn.cache, InPlaceKVCache)
        assert isinstance(layer.self_attn.sdpa, CustomOpCausalSDPA)


def test_llama_export_delegates_norms_attention_and_caches():
    report = cached_export("smollm2_135m", "vulkan", "fp16", random_config="tiny",
                           max_context=64, max_chunk=16, progress=False).report
    args = llama.ModelArgs.from_hf_config(llama.RANDOM_CONFIGS["tiny"])
    checks = report["backend_checks"]
    assert checks["compute_ops_delegated_share"] >= 0.95
    fused = checks["fused_ops"]
    assert fused["et_vk_rms_norm_default"] == {"delegated": 2 * args.n_layers + 1, "cpu": 0}
    assert fused["llama_custom_sdpa_default"] == {"delegated": args.n_layers, "cpu": 0}
    assert fused["auto_functionalized_v2"] == {"delegated": 2 * args.n_layers, "cpu": 0}
    # Executed on our runner wherever the source-built runtime has Vulkan; never a mismatch.
    expected = "executed" if cpp_runtime.has_backend("vulkan") else "unavailable"
    assert report["verification"]["status"] == expected


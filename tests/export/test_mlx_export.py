"""MLX variant of Gemma 4: schema generation, op semantics vs real MLX, numerics, lowering.

The export is checked by its lowering (every op inside the MLX delegate but the per-layer
table's CPU lookup, instruction histogram), by running the source-transformed model with the
custom ops' reference implementations, by comparing those implementations with MLX's own CPU
kernels (``mlx[cpu]``), and by executing it where the source-built runtime has MLX.
"""

import copy
import hashlib
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rne_tools.checkpoints import random_model
from rne_tools.checks import cpp_runtime
from rne_tools.checks.transform import check_transform
from rne_tools.errors import ExportError, VerificationError
from rne_tools.export import cached_export, export_llm
from rne_tools.export.backends import mlx_ops, mlx_schema
from rne_tools.export.backends.mlx import (
    INPUT_POS,
    delegate_input_indices,
    instruction_histogram,
    items_not_of_input,
    mlx_graphs,
)
from rne_tools.export.backends.mlx_ops import apply_mlx_transforms, load_mlx_ops, rope_reference
from rne_tools.export.host_tables import HostEmbedding, host_tables
from rne_tools.models import gemma4, layers
from rne_tools.paths import REPO_ROOT
from rne_tools.pte_parts import pte_parts

# Chunk 5 <= the tiny config's window of 6; the ring holds 6 + 5 - 1 = 10 slots. Groups of 32:
# the tiny model's widths (64, 96) have no groups of the registry's 64.
MLX_TINY = dict(random_config="tiny", max_context=64, max_chunk=5, embedding_quantization="4w",
                group_size=32)


@pytest.fixture(scope="module")
def mlx_export():
    return cached_export("gemma4_e2b", "mlx", "int4", progress=False, **MLX_TINY)


def _tree_digest(root):
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def test_schema_generation_is_reproducible(tmp_path):
    a = mlx_schema.ensure_schema(tmp_path / "a")
    b = mlx_schema.ensure_schema(tmp_path / "b")
    assert (a / "serialization" / "mlx_graph_schema.py").is_file()
    assert a.name == b.name  # same key: same wheel inputs
    assert _tree_digest(a) == _tree_digest(b)


def test_partitioner_imports_in_a_fresh_interpreter():
    code = (
        "from rne_tools.export.backends import mlx_schema; mlx_schema.install(); "
        "from executorch.backends.mlx import MLXPartitioner; print(MLXPartitioner.__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT / "tools"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("MLXPartitioner")


def test_ops_match_mlx_kernels():
    """Our op reference implementations compute what MLX's fused kernels compute."""
    mx = pytest.importorskip("mlx.core")
    load_mlx_ops()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 4, 5, 64, generator=g)
    for dims, base, scale, offset in [(64, 1e4, 1.0, 17), (16, 31.6, 0.5, 3)]:
        ours = rope_reference(x, dims, torch.tensor([offset]), False, base, scale)
        theirs = mx.fast.rope(
            mx.array(x.numpy()),
            dims,
            traditional=False,
            base=base,
            scale=scale,
            offset=mx.array([offset]),
        )
        np.testing.assert_allclose(ours.numpy(), np.array(theirs), atol=1e-4)

    q = torch.randn(1, 4, 3, 32, generator=g)
    k = torch.randn(1, 2, 10, 32, generator=g)
    v = torch.randn(1, 2, 10, 32, generator=g)
    allowed = torch.rand(3, 10, generator=g) > 0.4
    allowed[:, 0] = True
    bias = torch.zeros(3, 10).masked_fill(~allowed, float("-inf"))
    ours = torch.ops.mlx.custom_sdpa(q, k, v, 10 - 3, bias, 0.0, False, 1.0)
    theirs = mx.fast.scaled_dot_product_attention(
        mx.array(q.numpy()),
        mx.array(k.numpy()),
        mx.array(v.numpy()),
        scale=1.0,
        mask=mx.array(bias.numpy()),
    )
    np.testing.assert_allclose(ours.numpy(), np.array(theirs), atol=1e-4)

    h = torch.randn(2, 3, 64, generator=g)
    w = torch.rand(64, generator=g) + 0.5
    for weight in (w, None):
        ours = F.rms_norm(h, (64,), weight, 1e-6)
        theirs = mx.fast.rms_norm(
            mx.array(h.numpy()), None if weight is None else mx.array(weight.numpy()), 1e-6
        )
        np.testing.assert_allclose(ours.numpy(), np.array(theirs), atol=1e-5)


@pytest.mark.parametrize("name", sorted(gemma4.RANDOM_CONFIGS))
def test_transformed_model_matches_original(name):
    window = gemma4.RANDOM_CONFIGS[name]["sliding_window"]
    model, args, _ = random_model("gemma4", name, max_context=48, max_chunk=window, seed=3)
    _, check = check_transform(model, apply_mlx_transforms, atol=1e-3)
    assert check["greedy_tokens_match"] and check["max_abs_logit_diff"] < 1e-3
    assert check["prompt_tokens"] > window
    # Some chunk straddles the ring's wrap (window + chunk - 1 slots).
    ring, starts = window + window - 1, [0]
    for size in check["chunks"][:-1]:
        starts.append(starts[-1] + size)
    assert any(s % ring + n > ring for s, n in zip(starts, check["chunks"], strict=True))
    # Every partial-rotary layer now uses MLX's prefix rope with a rescaled base.
    ropes = [m for m in model.modules() if type(m).__name__ == "MLXRoPE"]
    assert len(ropes) == args.n_layers
    eager_blocks = (layers.RoPE, layers.MatmulSDPA, layers.RMSNorm)
    assert not any(type(m) in eager_blocks for m in model.modules())



def test_a_transform_that_changes_the_logits_is_refused(monkeypatch, tmp_path):
    from rne_tools.export.backends import mlx_ops

    def wrong_transform(model):
        model = apply_mlx_transforms(model)
        model.norm.weight.mul_(1.5)  # the kind of slip a rewrite can make
        return model

    monkeypatch.setattr(mlx_ops, "apply_mlx_transforms", wrong_transform)
    with pytest.raises(VerificationError, match="disagrees with the original"):
        export_llm("gemma4_e2b", "mlx", tmp_path, "int4", progress=False, **MLX_TINY)
    assert list(tmp_path.iterdir()) == []

def scalar_reads(graph):
    """What each ``.item()`` node of an exported graph reads: ``input_pos`` (the graph input,
    possibly through a select) or the name of the computed node."""
    reads = []
    for node in graph.nodes:
        target = str(node.target)
        if "item" not in target and "_local_scalar_dense" not in target:
            continue
        source = node.args[0]
        while source.op == "call_function" and "select" in str(source.target):
            source = source.args[0]
        reads.append("input_pos" if source.op == "placeholder" and "input_pos" in source.name
                     else source.name)
    return reads


def _export(model, max_chunk):
    dim = torch.export.Dim("T", min=1, max=max_chunk)
    example = (torch.zeros(1, max_chunk, dtype=torch.long), torch.tensor([0]))
    return torch.export.export(model, example, dynamic_shapes=({1: dim}, None), strict=False)


def test_full_layers_read_their_span_from_input_pos_only(mlx_export):
    """Full-attention layers attend over the written slots only, so the graph reads the chunk's
    start out of ``input_pos``, once per written flat cache, and no other scalar."""
    model, _, _ = random_model("gemma4", "tiny", max_context=64, max_chunk=5)
    apply_mlx_transforms(model)
    flat = [c for c in model.caches.values() if not c.ring]
    assert flat and all(isinstance(c, mlx_ops.MLXFlatCache) for c in flat)
    assert scalar_reads(_export(model, 5).graph) == ["input_pos"] * len(flat)
    # The lowered program: every ItemIntNode reads input_pos, and the span is sliced by it.
    pte = mlx_export.pte_path.read_bytes()
    graphs = mlx_graphs(pte)
    ops = instruction_histogram(graphs)
    assert ops["ItemIntNode"] == len(flat) and ops["RopeNode"] > 0
    # The delegate's inputs are not the program's: the hosted table's rows are one of them.
    (pos_input,) = delegate_input_indices(pte, INPUT_POS)
    assert pos_input != INPUT_POS and len(graphs[0]["input_map"]) == 3
    assert [items_not_of_input(g, pos_input) for g in graphs] == [[]]


def test_scalar_read_check_catches_another_tensor(mlx_export):
    """The export's check fails when an ItemIntNode reads anything but input_pos: the real
    program, with the select feeding one read pointed at the token ids instead."""
    pte = mlx_export.pte_path.read_bytes()
    graph = copy.deepcopy(mlx_graphs(pte)[0])
    (pos_input,) = delegate_input_indices(pte, INPUT_POS)
    (tokens_input,) = delegate_input_indices(pte, 0)
    tokens = graph["input_map"][tokens_input]["idx"]
    instructions = graph["instruction_chains"][graph["main_chain_idx"]]["instructions"]
    at = next(i for i, ins in enumerate(instructions) if ins["op_name"] == "ItemIntNode")
    source = next(ins for ins in reversed(instructions[:at])
                  if ins.get("out", {}).get("tid") == instructions[at]["x"]["tid"])
    assert source["op_name"] == "TakeNode"
    source["x"]["tid"] = tokens
    assert items_not_of_input(graph, pos_input) == [instructions[at]]


def test_a_scalar_of_a_computed_tensor_is_caught():
    """``scalar_reads`` can fail: a rope offset read out of a computed position tensor."""
    load_mlx_ops()

    class ItemRope(torch.nn.Module):
        def forward(self, tokens, input_pos):
            x = tokens.float()[:, None, :, None].expand(1, 1, tokens.shape[1], 8).contiguous()
            pos = input_pos + 1
            return torch.ops.mlx.rope(x, 8, pos[0].item(), False, 1e4, 1.0, None)

    assert scalar_reads(_export(ItemRope(), 5).graph) == ["add"]


def test_a_table_the_head_reads_stays_in_the_delegate():
    """MLX hosts the tables no linear reads; the token table a tied head reads stays, or the file
    would hold it twice."""
    tok, ple = torch.nn.Embedding(100, 32), torch.nn.Embedding(100, 64)
    model = torch.nn.ModuleDict({"tok": tok, "ple": ple, "out": torch.nn.Linear(32, 100)})
    model["out"].weight = tok.weight
    assert host_tables(model, torch.bfloat16, keep_tied=True) == ["ple"]
    assert model["tok"] is tok and isinstance(model["ple"], HostEmbedding)
    rows = model["ple"](torch.tensor([[1, 2]]))
    assert rows.dtype == torch.bfloat16
    torch.testing.assert_close(rows, ple.weight[[1, 2]].half().bfloat16()[None], rtol=0, atol=0)
    # Without keep_tied (Vulkan) every table is hosted.
    assert host_tables(model) == ["tok"]


def test_export_is_delegated_but_the_per_layer_table_and_fused(mlx_export):
    report = mlx_export.report
    args = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS["tiny"])
    checks = report["backend_checks"]
    # The per-layer table is looked up on the CPU, from the mapped file, by the 4-bit kernel;
    # the token table stays in the delegate, where the tied head reads it.
    assert checks["host_tables"] == ["ple_embeddings"]
    lookup = {"quantized_decomposed_embedding_4bit_dtype": 1}
    assert report["delegation"]["cpu_ops"] == lookup and checks["ops_outside_mlx"] == lookup
    parts = pte_parts(mlx_export.pte_path)
    width = args.n_layers * args.ple_dim
    # 4-bit values and a bf16 scale per group of 32 (symmetric: no zero points): the table, and
    # no more, is the constant segment.
    assert parts.constant == pytest.approx(args.ple_vocab_size * width * (0.5 + 2 / 32), rel=0.01)
    ops = checks["mlx_instructions"]
    own_kv = sum(1 for i in range(args.n_layers) if args.kv_source[i] == i)
    assert ops["RopeNode"] == args.n_layers + own_kv  # q everywhere, k where keys are computed
    assert ops["SdpaNode"] == args.n_layers
    assert ops["IndexCopyNode"] == 2 * own_kv  # tensor-indexed cache writes
    # Norms: 4 per block + PLE norm per block, q/k/v norms, final + PLE projection norms.
    assert ops["RMSNormNode"] == 5 * args.n_layers + args.n_layers + 2 * own_kv + 2
    # Every linear whose width the group size divides runs as an int4 quantized matmul,
    # the tied head included (its table is stored once).
    assert ops["QuantizedMatmulNode"] > 0
    assert all(name.endswith("ple_proj") for name in checks["left_unquantized"])
    assert checks["transform_check"]["greedy_tokens_match"]
    # Executed on our runner wherever the source-built runtime has MLX (its CPU backend here,
    # tools/build_binaries.py --platform linux); never a mismatch.
    expected = "executed" if cpp_runtime.has_backend("mlx") else "unavailable"
    assert report["verification"]["status"] == expected


def test_tied_embedding_is_quantized_and_stored_once(mlx_export):
    mlx_schema.install()
    from executorch.backends.mlx import pte_inspector

    payload = pte_inspector._load_mlx_payload(mlx_export.pte_path.read_bytes(), 0)
    names = [s["name"] for s in pte_inspector.parse_mlx_flatbuffer(payload.fb_data)["named_slots"]]
    # The embedding gather and the output head read the same packed int4 table.
    assert sum("output.parametrizations.weight.original0" in n for n in names) == 1
    assert not any("tok_embeddings" in n for n in names)


def test_export_follows_the_pte_contract(mlx_export):
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(mlx_export.pte_path)
    assert list(program.metadata("forward").input_tensor_meta(0).sizes()) == [1, 5]
    assert program.load_method("get_max_context_len").execute([]) == [64]
    assert program.load_method("get_backend").execute([]) == [3]
    assert program.load_method("get_eos_ids").execute([]) == [1, 106]
    # Sliding layers keep a ring of window + max_chunk - 1 slots: how far the runner may rewind.
    window = gemma4.RANDOM_CONFIGS["tiny"]["sliding_window"]
    assert program.load_method("get_kv_ring_size").execute([]) == [min(64, window + 5 - 1)]
    # This host's runtime has no MLX backend: forward is for a device.
    with pytest.raises(RuntimeError):
        program.load_method("forward")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(max_chunk=8), r"sliding window \(6\).*Allowed: 1\.\.6"),
        (dict(max_chunk=600, max_context=1024), r"cap the prefill chunk at 512.*1\.\.512"),
        (dict(group_size=16), r"group sizes 32, 64, 128"),
        (dict(embedding_group_size=128), r"groups its tables like its linears"),
        (dict(embedding_quantization="8w"), r"--embedding-quantization 4w"),
        (dict(quantization="fp32"), r"allowed: int4"),
    ],
)
def test_refuses_options_it_cannot_honour(tmp_path, overrides, message):
    options = dict(MLX_TINY, quantization="int4") | overrides
    with pytest.raises(ExportError, match=message):
        export_llm("gemma4_e2b", "mlx", tmp_path, progress=False, **options)
    assert list(tmp_path.iterdir()) == []


def test_refuses_other_architectures(tmp_path):
    with pytest.raises(ExportError, match=r"written for the gemma4 architectures \(backends\.yaml\); 'llama'"):
        export_llm(
            "smollm2_135m",
            "mlx",
            tmp_path,
            "int4",
            random_config="tiny",
            max_context=64,
            max_chunk=8,
            embedding_quantization="4w",
            progress=False,
        )

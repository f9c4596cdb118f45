"""Weights the size of Gemma 4 E2B's (a 262,144 x 8,960 per-layer table) are drawn and quantized
in blocks of rows, with the same result as handling them whole."""

import copy

import pytest
import torch
from torch import nn
from torchao.quantization import (
    Int8DynamicActivationIntxWeightConfig,
    IntxWeightOnlyConfig,
    quantize_,
)
from torchao.quantization.granularity import PerAxis, PerGroup

from rne_tools.checkpoints import random_model
from rne_tools.export import quantize
from rne_tools.models import layers

CONFIGS = {
    "embedding 4w": (
        IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
        nn.Embedding,
    ),
    "linear 8da4w": (
        Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(32)
        ),
        nn.Linear,
    ),
    "linear 8w": (IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)), nn.Linear),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_row_block_quantization_equals_quantizing_whole(monkeypatch, name):
    config, kind = CONFIGS[name]
    torch.manual_seed(0)
    model = nn.ModuleDict({"table": nn.Embedding(1000, 64), "head": nn.Linear(64, 1000, bias=False)})
    model.table.weight.data = model.table.weight.data.bfloat16()  # as a bf16 checkpoint's table
    whole, blocks = copy.deepcopy(model).float(), copy.deepcopy(model)

    quantize_(whole, config, filter_fn=lambda m, fqn: isinstance(m, kind))
    # 1000 x 64 weights in blocks of 93 rows (the last one shorter).
    monkeypatch.setattr(quantize, "_ROW_CHUNK", 93 * 64)
    quantize.quantize_weights(
        blocks, config, lambda m, fqn: isinstance(m, kind), dtype=torch.float32
    )

    target = next(k for k, m in model.items() if isinstance(m, kind))
    a, b = whole[target].weight, blocks[target].weight
    assert type(a) is type(b)
    for field in ("qdata", "scale", "zero_point"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    assert (a.block_size, a.dtype, a.activation_quantization) == (
        b.block_size,
        b.dtype,
        b.activation_quantization,
    )
    assert b.dtype == torch.float32  # quantized from float32 rows: the graph computes in float32


def test_random_weights_drawn_in_blocks_equal_drawn_whole(monkeypatch):
    whole, _, _ = random_model("gemma4", "tiny", max_context=32, max_chunk=8, seed=3)
    # Every 2-d weight now spans several blocks of 16 rows.
    monkeypatch.setattr(layers, "_INIT_CHUNK", 16)
    blocks, _, _ = random_model("gemma4", "tiny", max_context=32, max_chunk=8, seed=3)
    for (name, a), (_, b) in zip(
        whole.state_dict().items(), blocks.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_eager_lookup_in_a_quantized_table_dequantizes_only_its_rows(monkeypatch):
    config, _ = CONFIGS["embedding 4w"]
    torch.manual_seed(0)
    whole = nn.Embedding(1000, 64)
    rows_first = copy.deepcopy(whole)
    quantize_(whole, config, filter_fn=lambda m, fqn: isinstance(m, nn.Embedding))
    quantize.quantize_weights(rows_first, config, lambda m, fqn: isinstance(m, nn.Embedding))
    tokens = torch.tensor([[5, 999, 5, 0]])
    expected = nn.functional.embedding(tokens, whole.weight.dequantize())

    dequantized = []
    dequantize = type(whole.weight).dequantize
    monkeypatch.setattr(
        type(whole.weight),
        "dequantize",
        lambda self: dequantized.append(tuple(self.qdata.shape)) or dequantize(self),
    )
    assert torch.equal(rows_first(tokens), expected)
    assert dequantized == [(4, 64)]
    # Exporting traces torchao's dequantize + embedding, which ExecuTorch fuses into its
    # quantized embedding kernels.
    graph = torch.export.export(rows_first, (tokens,), strict=False).graph
    ops = [str(n.target) for n in graph.nodes if n.op == "call_function"]
    assert ops[-2:] == ["torchao.dequantize_affine.default", "aten.embedding.default"]


class _Lookup(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(300, 64)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.table(tokens) * 2.0


def _program_rows(model: nn.Module, tokens: torch.Tensor, spell_out: bool) -> tuple[list, torch.Tensor]:
    """Lower ``model`` as the pipeline does (quant fusion on) and run it on ExecuTorch's runtime:
    the ops its plan calls and the rows it answers."""
    import executorch.kernels.quantized  # noqa: F401  (the quantized embedding kernels)
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.runtime import Runtime

    edge = to_edge_transform_and_lower(torch.export.export(model, (tokens,), strict=False))
    if spell_out:
        quantize.spell_out_lookup_dtypes(edge.exported_program().graph_module)
    program = edge.to_executorch(ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True))
    plan = program.executorch_program.execution_plan[0]
    ops = [f"{op.name}.{op.overload}" for op in plan.operators]
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    return ops, method.execute([tokens])[0]


def test_four_bit_table_with_fp16_scales_answers_float32_rows_in_the_program():
    torch.manual_seed(0)
    model = _Lookup()
    quantize.quantize_8da4w(model, embedding_quantization="4w")
    weight = model.table.weight
    # 4.5 bits a value instead of 5; the rows are still float32.
    assert (weight.scale.dtype, weight.dtype) == (torch.float16, torch.float32)
    tokens = torch.tensor([[7, 299, 7, 0, 123]])
    eager = model(tokens)
    assert eager.dtype == torch.float32

    ops, rows = _program_rows(model, tokens, spell_out=True)
    assert "quantized_decomposed::embedding_4bit.dtype_out" in ops, ops
    assert torch.equal(rows, eager)
    # Without the dtype spelled out, the fusion picks the kernel that answers in the scales'
    # dtype, and float32 rows are read from fp16 data.
    ops, rows = _program_rows(model, tokens, spell_out=False)
    assert "quantized_decomposed::embedding_4bit.out" in ops, ops
    assert not torch.allclose(rows.float(), eager, atol=1e-2)


def test_table_scales_fp16_cannot_hold_stay_float32():
    torch.manual_seed(0)
    tiny, fine = _Lookup(), _Lookup()
    tiny.table.weight.data *= 1e-6  # group scales below fp16's normal range (6.1e-5)
    for model in (tiny, fine):
        quantize.quantize_8da4w(model, embedding_quantization="4w")
    assert tiny.table.weight.scale.dtype == torch.float32
    assert fine.table.weight.scale.dtype == torch.float16

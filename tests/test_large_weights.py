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

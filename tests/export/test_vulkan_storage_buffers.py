"""Weights larger than one Vulkan storage buffer (2^27 bytes, the limit every device guarantees):
Gemma 4 E2B's 262,144-row head is split into row shards, and the result is the same model.
Every embedding table is looked up on the CPU, float or quantized, with the same rows. (Their
execution on the runtime is in tests/parity/test_execution_parity.py.)"""

import pytest
import torch
from torch import nn

from rne_tools.export.backends import vulkan_ops
from rne_tools.export.backends.vulkan_ops import (
    DEVICE_FLOAT_BYTES,
    STORAGE_BUFFER_BYTES,
    ShardedLinear,
    shard_wide_linears,
)
from rne_tools.export.host_tables import HostEmbedding, host_tables
from rne_tools.export.quantize import quantize_8da4w


def test_e2b_head_splits_into_shards_that_each_fit_one_buffer():
    model = nn.ModuleDict({"output": nn.Linear(1536, 262_144, bias=False, device="meta")})
    assert shard_wide_linears(model) == ["output"]
    shards = model["output"].shards
    rows = [s.out_features for s in shards]
    assert sum(rows) == 262_144 and len(shards) == 7  # 805 MB of fp16 over 128 MiB buffers
    assert all(r * 1536 * DEVICE_FLOAT_BYTES <= STORAGE_BUFFER_BYTES for r in rows)
    # Whole blocks of rows (the delegate's 4-bit packing), near-equal: no sliver of a last shard.
    assert rows == [37_504] * 6 + [37_120]


def test_shards_are_aligned_when_the_budget_allows():
    linear = nn.Linear(8, 200, bias=False, device="meta")
    assert [s.out_features for s in ShardedLinear(linear, max_rows=150).shards] == [128, 72]
    # A budget under one aligned block takes what fits.
    assert [s.out_features for s in ShardedLinear(linear, max_rows=30).shards] == [30] * 6 + [20]


def test_sharded_linear_computes_the_same_linear():
    g = torch.Generator().manual_seed(0)
    linear = nn.Linear(32, 100, bias=True)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(100, 32, generator=g))
        linear.bias.copy_(torch.randn(100, generator=g))
    x = torch.randn(3, 32, generator=g)
    sharded = ShardedLinear(linear, max_rows=30)
    assert [s.out_features for s in sharded.shards] == [30, 30, 30, 10]
    torch.testing.assert_close(sharded(x), linear(x), rtol=0, atol=1e-5)  # GEMM blocking order


def test_small_linears_are_left_as_they_are():
    model = nn.Sequential(nn.Linear(64, 64))
    assert shard_wide_linears(model) == [] and isinstance(model[0], nn.Linear)


def test_float_table_is_looked_up_on_the_host_in_fp16():
    table = nn.Embedding(100, 32)
    model = nn.ModuleDict({"tok": table, "out": nn.Linear(32, 8)})
    assert host_tables(model) == ["tok"]
    host = model["tok"]
    assert isinstance(host, HostEmbedding) and host.weight.dtype == torch.float16
    tokens = torch.tensor([[0, 5, 99]])
    out = host(tokens)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, table(tokens).half().float(), rtol=0, atol=0)
    # Cast with the rest of the model (the low-precision eager reference), it answers in fp16.
    assert model.to(torch.float16)["tok"](tokens).dtype == torch.float16


def test_quantized_table_is_looked_up_on_the_host_as_it_was_quantized():
    # A 4-bit table on the GPU would be device memory for the program's life; on the CPU only
    # the rows looked up are read. It stays quantized: the same rows, the same bytes.
    g = torch.Generator().manual_seed(0)
    model = nn.ModuleDict({"tok": nn.Embedding(100, 32), "out": nn.Linear(32, 8)})
    with torch.no_grad():
        model["tok"].weight.copy_(torch.randn(100, 32, generator=g))
    tokens = torch.tensor([[0, 5, 99]])
    float_rows = model["tok"](tokens)
    quantize_8da4w(model, 32, "4w")
    quantized = model["tok"]
    expected = quantized(tokens)
    assert host_tables(model) == ["tok"]
    host = model["tok"]
    assert isinstance(host, HostEmbedding) and host.weight is quantized.weight
    out = host(tokens)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    # The host answers with the 4-bit rows, not float ones kept beside them.
    assert float((out - float_rows).abs().max()) > 1e-3


def test_a_row_wider_than_the_budget_is_refused(monkeypatch):
    monkeypatch.setattr(vulkan_ops, "STORAGE_BUFFER_BYTES", 64)
    with pytest.raises(ValueError, match="one row of"):
        shard_wide_linears(nn.Sequential(nn.Linear(64, 4)))

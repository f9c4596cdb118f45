"""An output head tied to its 4-bit token table, stored once: ``rne::tied_head_4bit``.

Gemma 4 ties its head to the token embeddings. XNNPACK computes the head from a copy of its own
(its linears pack weights into their own layout), so a 4-bit table was stored twice: E2B's
262,144 x 1,536 table is 226 MB per copy. Here the table is packed once, in the layout of
ExecuTorch's ``quantized_decomposed::embedding_4bit`` (two values a byte, the even one in the
high nibble, value = nibble - 8, one scale per group of a row), and two CPU ops read it: that
lookup kernel for the input rows, and ``rne::tied_head_4bit`` for the logits. The op's kernel
is ours (``cpp/kernels/tied_head.h``, registered by the runner, ``cpp/runner/src/kernels.cpp``).

The op's definition includes how it rounds the hidden state: in blocks of 32 values to
symmetric int8 (scale max|x| / 127, round half to even), so the kernel sums integer products.
XNNPACK's 8da4w head rounds its activations to int8 too (per row). The eager reference below
computes the same rounding, so the program and eager differ only in float summation order.
"""

from __future__ import annotations

import torch
from torch import nn

from rne_tools.errors import ExportError

BLOCK = 32  # activation values per int8 scale
_VOCAB_CHUNK = 8192  # table rows dequantized at a time by the eager reference

_lib = torch.library.Library("rne", "DEF")
_lib.define("tied_head_4bit(Tensor x, Tensor packed, Tensor scales) -> Tensor")
_lib.define(
    "tied_head_4bit.out(Tensor x, Tensor packed, Tensor scales, *, Tensor(a!) out) -> Tensor(a!)"
)


def quantize_blocks(x: torch.Tensor) -> torch.Tensor:
    """``x`` (float, last dim a multiple of ``BLOCK``) as the op rounds it: int8 per block of
    32, returned dequantized in float32."""
    blocks = x.float().reshape(*x.shape[:-1], -1, BLOCK)
    scale = blocks.abs().amax(-1, keepdim=True) / 127
    q = torch.where(scale > 0, torch.round(blocks / scale), 0.0).clamp(-127, 127)
    return (q * scale).reshape(x.shape)


def unpack_rows(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Rows of a packed 4-bit table ``[N, D/2]`` with scales ``[N, D/group]``, in float32."""
    hi = (packed >> 4).to(torch.int8) - 8
    lo = (packed & 15).to(torch.int8) - 8
    q = torch.stack((hi, lo), dim=-1).reshape(packed.shape[0], -1).float()
    groups = scales.shape[1]
    return (q.reshape(q.shape[0], groups, -1) * scales.float()[..., None]).reshape(q.shape)


def _check(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> None:
    width = 2 * packed.shape[1]
    if x.dtype != torch.float32 or x.shape[-1] != width or width % BLOCK:
        raise ValueError(
            f"tied_head_4bit: x must be float32 [..., {width}] (a multiple of {BLOCK}), got "
            f"{x.dtype} {list(x.shape)}"
        )
    if packed.dtype != torch.uint8 or scales.shape[0] != packed.shape[0]:
        raise ValueError("tied_head_4bit: packed must be uint8 [V, D/2], scales [V, D/group]")
    if scales.dtype not in (torch.float32, torch.float16) or width % scales.shape[1]:
        raise ValueError("tied_head_4bit: scales must be float32 or fp16, groups dividing D")
    if (width // scales.shape[1]) % BLOCK:
        raise ValueError(f"tied_head_4bit: the group must be a multiple of {BLOCK}")


@torch.library.impl(_lib, "tied_head_4bit", "CompositeExplicitAutograd")
def _tied_head(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    _check(x, packed, scales)
    xq = quantize_blocks(x).reshape(-1, x.shape[-1])
    out = torch.empty(xq.shape[0], packed.shape[0], dtype=torch.float32)
    for start in range(0, packed.shape[0], _VOCAB_CHUNK):
        rows = slice(start, start + _VOCAB_CHUNK)
        out[:, rows] = xq @ unpack_rows(packed[rows], scales[rows]).T
    return out.reshape(*x.shape[:-1], packed.shape[0])


@torch.library.impl(_lib, "tied_head_4bit", "Meta")
def _tied_head_meta(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], packed.shape[0]), dtype=torch.float32)


@torch.library.impl(_lib, "tied_head_4bit.out", "CompositeExplicitAutograd")
def _tied_head_out(
    x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, *, out: torch.Tensor
) -> torch.Tensor:
    result = _tied_head(x, packed, scales)
    out.resize_(result.shape).copy_(result)
    return out


@torch.library.impl(_lib, "tied_head_4bit.out", "Meta")
def _tied_head_out_meta(
    x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, *, out: torch.Tensor
) -> torch.Tensor:
    return out.resize_((*x.shape[:-1], packed.shape[0]))


class PackedTable4bit(nn.Module):
    """A 4-bit token table in ``embedding_4bit``'s packed layout, looked up by that kernel.

    Rows are returned in the model's float dtype: ``dtype_marker`` (float32) follows ``.to()``,
    so a copy cast for a low-precision eager reference (Vulkan's fp16) answers in fp16."""

    def __init__(self, packed: torch.Tensor, scales: torch.Tensor) -> None:
        super().__init__()
        import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401  (the op)

        self.register_buffer("packed", packed)
        self.register_buffer("scales", scales)
        self.register_buffer("dtype_marker", torch.zeros((), dtype=torch.float32))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        dtype = self.dtype_marker.dtype
        if torch.compiler.is_compiling():
            return torch.ops.quantized_decomposed.embedding_4bit.dtype(
                self.packed, self.scales, None, -8, 7, tokens, dtype=dtype
            )
        # Eager: only the rows looked up are unpacked (the op's reference unpacks all).
        rows = tokens.reshape(-1)
        unpacked = unpack_rows(self.packed[rows], self.scales[rows]).to(dtype)
        return unpacked.reshape(*tokens.shape, -1)


class TiedHead4bit(nn.Module):
    """Logits from a ``PackedTable4bit``'s rows; the table stays the model's token table (not
    a submodule here, so it is stored once)."""

    def __init__(self, table: PackedTable4bit) -> None:
        super().__init__()
        self._table = (table,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        table = self._table[0]
        return torch.ops.rne.tied_head_4bit(x.float(), table.packed, table.scales)


def pack_table(weight: object) -> PackedTable4bit:
    """A torchao 4-bit grouped, symmetric table (``IntxUnpackedToInt8Tensor``) packed."""
    qdata, scale, zero_point = (getattr(weight, f, None) for f in ("qdata", "scale", "zero_point"))
    if qdata is None or qdata.dim() != 2 or qdata.shape[1] % 2:
        raise ExportError("pack_table: the token table is not a 2-d quantized table.")
    if zero_point is not None and bool(zero_point.any()):
        raise ExportError("pack_table: the table's quantization is not symmetric.")
    nibbles = (qdata.to(torch.int16) + 8).to(torch.uint8)
    packed = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    return PackedTable4bit(packed.contiguous(), scale.detach().clone())


def tied_heads(model: nn.Module) -> list[tuple[str, str]]:
    """(table, head) module names of every linear whose weight is an embedding table's. Taken
    before quantization, which gives the table a weight of its own."""
    tables = {id(m.weight): name for name, m in model.named_modules() if isinstance(m, nn.Embedding)}
    return [
        (tables[id(m.weight)], name)
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and id(m.weight) in tables
    ]


def tie_head_to_table(model: nn.Module, table_name: str, head_name: str) -> bool:
    """Replace the 4-bit token table ``table_name`` and the head ``head_name`` tied to it by one
    packed table (a ``PackedTable4bit`` and a ``TiedHead4bit`` reading it), in place. Run after
    the table is quantized and before the linears are, so the head is never quantized as a
    linear of its own. Returns False (nothing changed) where the table is not 4-bit in groups
    that are a multiple of ``BLOCK``."""
    weight = model.get_submodule(table_name).weight
    scale = getattr(weight, "scale", None)
    if scale is None or scale.dim() != 2 or (weight.shape[1] // scale.shape[1]) % BLOCK:
        return False
    qdata = weight.qdata
    if int(qdata.min()) < -8 or int(qdata.max()) > 7:
        return False  # 8-bit rows
    table = pack_table(weight)
    for name, module in ((table_name, table), (head_name, TiedHead4bit(table))):
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent), attr, module)
    return True

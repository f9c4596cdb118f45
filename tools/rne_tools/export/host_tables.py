"""Embedding tables looked up on the CPU, out of a GPU delegate (Vulkan, MLX).

A lookup reads T rows. On the CPU those are T rows of the memory-mapped program: only the rows
looked up become resident, and their pages are clean. In a GPU delegate the whole table is device
memory for the program's life (E2B's 4-bit per-layer table: 1.3 GB), and a table can exceed the
device's largest buffer. A quantized table stays quantized: ExecuTorch's ``to_executorch`` fuses
its dequantize + lookup into the CPU's quantized embedding kernels (``embedding_4bit``,
``embedding_byte``). The rows then enter the delegate.

MLX keeps a table whose weight is also a linear's (its head tied to the token embeddings) in the
delegate: the head reads all of it every token, and hosting it would store it twice. Vulkan hosts
every table: its delegate's float lookup kernel is the one that broke SmolLM2's chunked prefill
(docs/design.md); a 4-bit token table that a head reads (``tied_head.PackedTable4bit``) is on the
CPU with its head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from rne_tools.export.tied_head import PackedTable4bit
from rne_tools.export.transforms import apply_replacements


class HostEmbedding(nn.Module):
    """An embedding table the backend's partitioner leaves on the CPU (``HOST_MODULES``).

    A float table is kept in fp16, as a device would keep it; a quantized one (a tensor
    subclass) as it was quantized. Rows are returned in ``dtype`` (default: float32, the
    graph's dtype, also for a table kept in its checkpoint's bf16, Gemma 4's per-layer table);
    ``dtype_marker`` carries it and follows ``.to()``, so a model cast for a low-precision
    eager reference answers in that precision.
    """

    def __init__(self, embedding: nn.Embedding, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        weight = embedding.weight
        if is_traceable_wrapper_subclass(weight):
            self.weight = weight
        else:
            self.register_buffer("weight", weight.detach().to(torch.float16))
        dtype = dtype or torch.promote_types(weight.dtype, torch.float32)
        self.register_buffer("dtype_marker", torch.zeros((), dtype=dtype))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.weight).to(self.dtype_marker.dtype)


# Module types a partitioner must leave on the CPU (matched by type name).
HOST_MODULES = [HostEmbedding.__name__, PackedTable4bit.__name__]


def host_tables(
    model: nn.Module, dtype: torch.dtype | None = None, keep_tied: bool = False
) -> list[str]:
    """Replace every embedding table, float or quantized, by a ``HostEmbedding`` answering in
    ``dtype``; with ``keep_tied``, not a table whose weight a linear shares. Returns the names of
    the tables now on the CPU: those replaced, and packed tables (always there). Run after
    quantization, so a quantized table is hosted as what it became."""
    linears = (m.weight for m in model.modules() if isinstance(m, nn.Linear))
    tied = {id(w) for w in linears} if keep_tied else set()

    def host(embedding: nn.Module) -> nn.Module:
        assert isinstance(embedding, nn.Embedding)
        return embedding if id(embedding.weight) in tied else HostEmbedding(embedding, dtype)

    hosted = apply_replacements(model, {nn.Embedding: host})
    packed = [name for name, m in model.named_modules() if isinstance(m, PackedTable4bit)]
    return hosted + packed


def traced_in_host_table(node: fx.Node) -> bool:
    """Whether an exported graph's node was traced inside a table on the CPU (``HOST_MODULES``:
    its lookup, the dequantize of its rows, their cast)."""
    stack = node.meta.get("nn_module_stack") or {}
    return any(host in str(typename) for _, typename in stack.values() for host in HOST_MODULES)

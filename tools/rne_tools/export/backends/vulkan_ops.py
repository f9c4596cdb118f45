"""Vulkan's transform table: the decoders' building blocks on the Vulkan backend's fused ops.

A model whose attention layers all attend fully over their own caches (Llama: declared by their
``AttentionSpec``) puts attention on ``llama::custom_sdpa`` + ``llama::update_cache`` (the
XNNPACK export's own custom-op attention, ``export.custom_ops``), which Vulkan's lowering fuses
into ``sdpa_with_kv_cache`` at the graph's one start position. Otherwise (sliding windows, KV
sharing: Gemma 4):

- Every RMSNorm (weighted q/k/layer norms and the weightless v_norm, which gets a constant
  all-ones weight) -> ``et_vk::rms_norm``. Gemma 4 scales by ``weight`` itself (no ``1 + weight``
  form), so the weight passes through unchanged.
- KV caches -> ``llama::update_cache`` (Vulkan's cache-update kernel) on flat [1, slots, H, D]
  caches, at a start read from ``input_pos[0].item()``, which the Vulkan partitioner turns into
  its ``select_as_symint`` op (Vulkan, unlike MLX, replays data-dependent scalars).
- Attention -> ``et_vk::sdpa`` (fused QK^T, fp32 softmax, AV) with an additive mask, over only
  the cache slots the chunk can see, so decode cost follows the tokens in the cache (full
  layers: slots ``[0, start + T)``) or the window (sliding layers), not ``max_context``. A
  sliding cache stores position p at slot ``p + window - 1`` (the first ``window - 1`` slots are
  never written and always masked), so a chunk's span starts at slot ``start`` and has a length
  that does not depend on the data. Grouped-query heads are folded into the query rows.
  (``llama::custom_sdpa`` is not used: Vulkan's lowering fuses it with the layer's own cache
  update at a single graph-wide start, which KV-shared layers and offset sliding slots break.)

Linears larger than one storage buffer are split into row shards (``ShardedLinear``), except a
head tied to a 4-bit token table: that one reads the table on the CPU (``export.tied_head``).
Every embedding table is looked up on the CPU (``export.host_tables``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from rne_tools.export.custom_ops import LastWrite, chunk_start, custom_op_sdpa, in_place_caches
from rne_tools.export.transforms import Factory, apply_replacements
from rne_tools.models import layers

# Additive mask value: finite so fp16 cannot overflow into NaN, far below any real score.
MASKED = -30000.0


def _load_ops() -> None:
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk::rms_norm, et_vk::sdpa)
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama::update_cache)


class VulkanRMSNorm(nn.Module):
    """``et_vk::rms_norm``; the weightless form uses a constant ones weight."""

    def __init__(self, norm: layers.RMSNorm) -> None:
        super().__init__()
        self.eps = norm.eps
        if norm.weight is not None:
            self.weight = norm.weight
        else:
            self.register_buffer("weight", torch.ones(norm.dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.et_vk.rms_norm(x, self.weight, self.eps)


class VulkanKVCache(LastWrite, layers.KVCache):
    """[1, slots, H_kv, D] cache written by ``llama::update_cache``.

    ``update`` and ``read`` return only the slots a chunk of T tokens at ``start`` can see, as
    [1, H_kv, S, D] like the eager cache. Full attention (``window`` None): slot = position,
    span ``[0, start + T)``. Sliding: slot = position + ``window - 1``, span
    ``[start, start + T + window - 1)``, whose length does not depend on the data.
    """

    def __init__(
        self, n_kv_heads: int, max_context: int, max_chunk: int, head_dim: int, window: int | None
    ) -> None:
        self.pad = window - 1 if window else 0
        # max_chunk - 1 spare slots at the end, never read: torch.export bounds the start and
        # the chunk length separately, so it can only prove a span in range with them.
        size = max_context + self.pad + max_chunk - 1
        # Not a ring: ``window`` only offsets the slots (the attended span follows it).
        super().__init__(n_kv_heads, size, head_dim, window=None)
        self.max_context, self.attended_window = max_context, window
        self.k = torch.zeros(1, self.size, n_kv_heads, head_dim)
        self.v = torch.zeros(1, self.size, n_kv_heads, head_dim)

    def update(
        self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        seq_len = k.shape[2]
        start = chunk_start(input_pos, seq_len, self.max_context)
        torch.ops.llama.update_cache(k.transpose(1, 2).contiguous(), self.k, start + self.pad)
        torch.ops.llama.update_cache(v.transpose(1, 2).contiguous(), self.v, start + self.pad)
        self.remember_write(start, seq_len)
        return self._span(start, seq_len)

    def read(self, input_pos: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        # KV-shared layers: Vulkan can only turn a graph input into a SymInt (LastWrite).
        return self._span(self.start_of_last(seq_len), seq_len)

    def _span(self, start: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        first = start if self.attended_window else 0
        end = start + seq_len + self.pad
        return self.k[:, first:end].transpose(1, 2), self.v[:, first:end].transpose(1, 2)


class VulkanSDPA(layers.SDPA):
    """``et_vk::sdpa`` over the cache span ``VulkanKVCache`` returns, with an additive mask
    built from the chunk's position. Query row i is position start + i; span column j is
    position j (full attention) or start - window + 1 + j (sliding, where it must also be
    inside the window and not negative). GQA is folded into the query rows."""

    def __init__(self, sdpa: layers.SDPA) -> None:
        super().__init__(sdpa.spec)
        spec = sdpa.spec
        self.n_rep, self.window = spec.n_heads // spec.n_kv_heads, spec.window
        self.scale = spec.scale if spec.scale is not None else spec.head_dim**-0.5

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        b, h, t, d = q.shape
        h_kv, span = k.shape[1], k.shape[2]
        i = torch.arange(t)[:, None]
        j = torch.arange(span)[None, :]
        if self.window is None:
            seen = j <= i + input_pos
        else:
            seen = (j >= i) & (j - i < self.window) & (j + input_pos >= self.window - 1)
        bias = (1.0 - seen.to(q.dtype)) * MASKED
        # Query head j uses kv head j // n_rep: stack each group's rows under its kv head.
        q = q.contiguous().view(b, h_kv, self.n_rep * t, d)
        bias = bias.repeat(self.n_rep, 1).expand(b, h_kv, self.n_rep * t, span)
        out = torch.ops.et_vk.sdpa(q, k, v, bias, self.scale)
        return out.unflatten(2, (self.n_rep, t)).flatten(1, 2).transpose(1, 2).reshape(b, t, h * d)


# Vulkan guarantees every device a maxStorageBufferRange of at least 2^27 bytes (many phones report
# exactly that), and the delegate binds each weight as one storage buffer, so a larger weight does
# not load there. (ExecuTorch's own check compares the limit with the element count, so lavapipe
# refuses only tensors over 2^27 elements, and its partitioner keeps only embedding tables over
# 2^27 elements off the GPU.)
STORAGE_BUFFER_BYTES = 2**27
# Bytes per weight element on the device: force_fp16 stores float weights in fp16. 4-bit weights
# take less, so a linear sharded for fp16 fits whatever it is quantized to.
DEVICE_FLOAT_BYTES = 2


# Shard boundaries fall on whole blocks of output rows: the delegate packs 4-bit weights in blocks
# of output channels, and its fusion pass failed on a 37,450-row shard (37,450 is not a multiple
# of 4). Sharding never makes a row count less aligned than the unsharded linear's.
SHARD_ROW_ALIGN = 64


class ShardedLinear(nn.Module):
    """A linear whose weight exceeds one storage buffer (a vocabulary-sized head), split by output
    rows into shards of at most ``max_rows`` rows, near-equal and aligned to
    ``SHARD_ROW_ALIGN``; the output is their concatenation, so the result is the same linear.
    Each shard is an ``nn.Linear``, quantized like any other."""

    def __init__(self, linear: nn.Linear, max_rows: int) -> None:
        super().__init__()
        out_features, in_features = linear.weight.shape
        even = math.ceil(out_features / math.ceil(out_features / max_rows))
        rows = min(-(-even // SHARD_ROW_ALIGN) * SHARD_ROW_ALIGN,
                   max_rows // SHARD_ROW_ALIGN * SHARD_ROW_ALIGN) or max_rows
        self.shards = nn.ModuleList()
        for start in range(0, out_features, rows):
            end = min(start + rows, out_features)
            shard = nn.Linear(in_features, end - start, bias=linear.bias is not None,
                              device=linear.weight.device, dtype=linear.weight.dtype)
            shard.weight = nn.Parameter(linear.weight.detach()[start:end].clone(),
                                        requires_grad=False)
            if linear.bias is not None:
                shard.bias = nn.Parameter(linear.bias.detach()[start:end].clone(),
                                          requires_grad=False)
            self.shards.append(shard)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([shard(x) for shard in self.shards], dim=-1)


def _fits(weight: torch.Tensor, budget: int) -> bool:
    return weight.numel() * DEVICE_FLOAT_BYTES <= budget


def _shard_if_wide(budget: int, whole: set[int]) -> Factory:
    def factory(linear: nn.Module) -> nn.Module:
        assert isinstance(linear, nn.Linear)
        if _fits(linear.weight, budget) or id(linear.weight) in whole:
            return linear
        max_rows = budget // (linear.in_features * DEVICE_FLOAT_BYTES)
        if max_rows < 1:
            raise ValueError(
                f"one row of a linear {tuple(linear.weight.shape)} exceeds {budget} bytes"
            )
        return ShardedLinear(linear, max_rows)

    return factory


def shard_wide_linears(
    model: nn.Module, budget: int | None = None, keep_tied_heads: bool = False
) -> list[str]:
    """Replace every linear whose fp16 weight exceeds ``budget`` bytes (default
    ``STORAGE_BUFFER_BYTES``) by a ``ShardedLinear``; with ``keep_tied_heads``, not a head whose
    weight is a token table's (it will read that table on the CPU). Returns the names replaced."""
    budget = STORAGE_BUFFER_BYTES if budget is None else budget
    tables = (m.weight for m in model.modules() if isinstance(m, nn.Embedding))
    whole = {id(w) for w in tables} if keep_tied_heads else set()
    return apply_replacements(model, {nn.Linear: _shard_if_wide(budget, whole)})


def wide_linears(model: nn.Module) -> list[str]:
    """Names of the linears over one storage buffer (``STORAGE_BUFFER_BYTES``) at fp16."""
    return [
        name
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and not _fits(m.weight, STORAGE_BUFFER_BYTES)
    ]


def apply_vulkan_transforms(model: nn.Module, keep_tied_heads: bool = False) -> nn.Module:
    """Shard linears too wide for one storage buffer (before quantization, so each shard is
    quantized as a linear of its own; ``keep_tied_heads``: see ``shard_wide_linears``), then
    apply Vulkan's table in place (module docstring). ``model.sharded_linears`` names the sharded
    ones."""
    _load_ops()
    model.sharded_linears = shard_wide_linears(model, keep_tied_heads=keep_tied_heads)
    # The graph's float dtype (the token table's), for the modules made here.
    dtype = next(model.parameters()).dtype
    specs = [m.spec for m in model.modules() if isinstance(m, layers.SDPA)]
    fused = all(s.window is None and not s.shares_kv for s in specs)
    table: dict[type, Factory]
    if fused:
        table = {
            layers.KVCache: in_place_caches(),
            layers.SDPA: lambda sdpa: custom_op_sdpa(model, sdpa),
        }
    else:
        table = {
            layers.KVCache: lambda c: VulkanKVCache(
                c.k.shape[1], model.max_context, model.max_chunk, c.k.shape[3], c.window
            ).to(dtype),
            layers.SDPA: VulkanSDPA,
        }
    table[layers.RMSNorm] = lambda norm: VulkanRMSNorm(norm).to(dtype)
    apply_replacements(model, table)
    return model

"""Source transforms onto ExecuTorch's LLM custom CPU ops (``llama::update_cache``,
``llama::custom_sdpa``).

The portable decomposition of masked SDPA over a static cache is many small CPU ops that split
the XNNPACK partition at every layer, and it reads every cache slot, written or not. The custom
ops write the new keys/values in place and attend causally over positions ``[0, start + T)``
only, which is both faster and independent of the cache's initial contents.

The cache may be kept in a narrower dtype than the model computes in (fp16 for the quantized
exports, as llama.cpp keeps its own): a decode step at long context reads the whole cache, so
half the bytes is most of the step's attention cost. Attention then runs on fp16 q/k/v (the ops
take one dtype for all three) and its output is widened back.
"""

from __future__ import annotations

import torch
from torch import nn

from rne_tools.models import llama


def _load_ops() -> None:
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (registers llama::*)


def chunk_start(input_pos: torch.Tensor, seq_len: int, limit: int) -> int:
    """The chunk's first position as a SymInt, bounded so that ``seq_len`` slots from it fit in
    ``limit``: torch.export needs the bounds to prove the in-place cache writes in range. It is
    read from the graph input ``input_pos``, which every backend can turn into a runtime int."""
    start = input_pos[0].item()
    torch._check(start >= 0)
    torch._check(start + seq_len <= limit)
    return start


class LastWrite:
    """Mixin for a cache written in place: remembers the last write's start SymInt and length.

    KV-shared layers run after the write in the same forward, on its last positions. Their
    start is derived from the write's SymInt, because ``.item()`` of a computed position
    tensor (their own ``input_pos`` is a view of the positions) does not lower.
    """

    def remember_write(self, start: int, seq_len: int) -> None:
        self._written = (start, seq_len)

    def start_of_last(self, seq_len: int) -> int:
        """Position of the first of the last ``seq_len`` positions written."""
        start, written = self._written
        return start + written - seq_len


class CustomOpKVCacheAttention(nn.Module):
    """Drop-in for ``llama.KVCacheAttention`` with caches laid out ``[1, S, Hkv, D]`` in
    ``cache_dtype`` (the attention's dtype too; its output comes back in the query's)."""

    def __init__(self, n_heads: int, n_kv_heads: int, head_dim: int, max_context: int,
                 cache_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        _load_ops()
        self.n_heads, self.head_dim, self.max_context = n_heads, head_dim, max_context
        cache_shape = (1, max_context, n_kv_heads, head_dim)
        self.register_buffer("k_cache", torch.zeros(cache_shape, dtype=cache_dtype),
                             persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache_shape, dtype=cache_dtype),
                             persistent=False)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        input_pos: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        start = chunk_start(input_pos, q.shape[2], self.max_context)
        dtype = self.k_cache.dtype
        # -> [1, T, heads, D] in the cache's dtype
        q_c, k_c, v_c = (x.transpose(1, 2).to(dtype) for x in (q, k, v))
        torch.ops.llama.update_cache(k_c, self.k_cache, start)
        torch.ops.llama.update_cache(v_c, self.v_cache, start)
        out = torch.ops.llama.custom_sdpa(q_c, self.k_cache, self.v_cache, start, None, 0.0, True)
        return out.to(q.dtype).reshape(1, -1, self.n_heads * self.head_dim)


def use_custom_attention(model: nn.Module, cache_dtype: torch.dtype | None = None) -> int:
    """Replace every ``llama.KVCacheAttention`` in ``model``, with caches in ``cache_dtype``
    (default: the replaced caches' own); returns how many were replaced."""
    replaced = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, llama.KVCacheAttention):
                new = CustomOpKVCacheAttention(
                    child.n_heads, child.n_kv_heads, child.head_dim, child.k_cache.shape[2],
                    cache_dtype or child.k_cache.dtype,
                )
                setattr(module, name, new)
                replaced += 1
    return replaced

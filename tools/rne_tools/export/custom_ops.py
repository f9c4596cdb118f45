"""Replacements on ExecuTorch's LLM custom CPU ops (``llama::update_cache``,
``llama::custom_sdpa``), shared by the XNNPACK and Vulkan tables.

The portable decomposition of masked SDPA over a static cache is many small CPU ops that split
the XNNPACK partition at every layer, and it reads every cache slot, written or not. The custom
ops write the new keys/values in place and attend causally over positions ``[0, start + T)``
only, which is both faster and independent of the cache's initial contents. They serve
full-attention layers (flat caches); a KV-shared layer reads its source's cache through the same
SDPA.

The cache may be kept in a narrower dtype than the model computes in (fp16 for the quantized
Llama exports, as llama.cpp keeps its own): a decode step at long context reads the whole cache,
so half the bytes is most of the step's attention cost. Attention then runs on fp16 q/k/v (the
ops take one dtype for all three) and its output is widened back.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rne_tools.export.transforms import Decoder, Factory
from rne_tools.models import layers


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


class InPlaceKVCache(LastWrite, layers.KVCache):
    """A flat cache ``[1, size, H_kv, D]`` in ``dtype`` (default: the replaced cache's), written
    in place by ``llama::update_cache``.

    ``update`` and ``read`` return the cache itself in that layout (a transposed view would be
    a copy of it once lowered), which only ``CustomOpCausalSDPA`` reads.
    """

    def __init__(self, cache: layers.KVCache, dtype: torch.dtype | None = None) -> None:
        nn.Module.__init__(self)
        _load_ops()
        if cache.ring:
            raise ValueError("InPlaceKVCache replaces flat (full-attention) caches only")
        _, n_kv_heads, size, head_dim = cache.k.shape
        self.size, self.window = size, None
        shape = (1, size, n_kv_heads, head_dim)
        dtype = dtype or cache.k.dtype
        self.register_buffer("k", torch.zeros(shape, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(shape, dtype=dtype), persistent=False)

    def update(
        self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        seq_len = k.shape[2]
        start = chunk_start(input_pos, seq_len, self.size)
        for new, cache in ((k, self.k), (v, self.v)):
            new = new.transpose(1, 2)
            # A cast to the same dtype would still be a node of the exported graph.
            new = new if new.dtype == cache.dtype else new.to(cache.dtype)
            torch.ops.llama.update_cache(new, cache, start)
        self.remember_write(start, seq_len)
        return self.k, self.v

    def read(self, input_pos: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k, self.v


class CustomOpCausalSDPA(layers.SDPA):
    """A full-attention layer's SDPA as ``llama::custom_sdpa`` over an ``InPlaceKVCache``: query
    row i (position start + i) sees slots ``[0, start + i]``, which is the causal mask of these
    layers. The kernel groups query heads per kv head itself."""

    def __init__(self, sdpa: layers.SDPA, cache: InPlaceKVCache) -> None:
        super().__init__(sdpa.spec)
        if sdpa.spec.window is not None:
            raise ValueError("CustomOpCausalSDPA replaces full-attention layers only")
        # Not a submodule: the cache belongs to the model (and to several layers).
        self._cache = (cache,)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        """q [1, H, T, D]; k/v the caches [1, S, H_kv, D] -> [1, T, H * D]."""
        start = self._cache[0].start_of_last(q.shape[2])
        out = torch.ops.llama.custom_sdpa(
            q.transpose(1, 2).to(k.dtype), k, v, start, None, 0.0, True, self.spec.scale
        )
        return out.to(q.dtype).reshape(1, -1, self.spec.n_heads * self.spec.head_dim)


def in_place_caches(dtype: torch.dtype | None = None) -> Factory:
    """Factory for ``layers.KVCache``: flat caches in place (in ``dtype``), rings kept."""
    return lambda cache: cache if cache.ring else InPlaceKVCache(cache, dtype)


def custom_op_sdpa(model: Decoder, sdpa: layers.SDPA) -> CustomOpCausalSDPA:
    """``CustomOpCausalSDPA`` over the (already replaced) cache the layer reads."""
    return CustomOpCausalSDPA(sdpa, model.cache_for(sdpa.spec.layer))

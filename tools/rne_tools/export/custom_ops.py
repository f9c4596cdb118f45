"""Source transforms onto ExecuTorch's LLM custom CPU ops (``llama::update_cache``,
``llama::custom_sdpa``).

The portable decomposition of masked SDPA over a static cache is many small CPU ops that split
the XNNPACK partition at every layer, and it reads every cache slot, written or not. The custom
ops write the new keys/values in place and attend causally over positions ``[0, start + T)``
only, which is both faster and independent of the cache's initial contents.
"""

from __future__ import annotations

import torch
from torch import nn

from rne_tools.models import llama


def _load_ops() -> None:
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (registers llama::*)


class CustomOpKVCacheAttention(nn.Module):
    """Drop-in for ``llama.KVCacheAttention`` with caches laid out ``[1, S, Hkv, D]``."""

    def __init__(self, n_heads: int, n_kv_heads: int, head_dim: int, max_context: int) -> None:
        super().__init__()
        _load_ops()
        self.n_heads, self.head_dim, self.max_context = n_heads, head_dim, max_context
        cache_shape = (1, max_context, n_kv_heads, head_dim)
        self.register_buffer("k_cache", torch.zeros(cache_shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache_shape), persistent=False)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        input_pos: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        start = input_pos[0].item()
        torch._check(start >= 0)
        torch._check(start < self.max_context)
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # -> [1, T, heads, D]
        torch.ops.llama.update_cache(k.to(self.k_cache.dtype), self.k_cache, start)
        torch.ops.llama.update_cache(v.to(self.v_cache.dtype), self.v_cache, start)
        out = torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start, None, 0.0, True)
        return out.reshape(1, -1, self.n_heads * self.head_dim)


def use_custom_attention(model: nn.Module) -> int:
    """Replace every ``llama.KVCacheAttention`` in ``model``; returns how many were replaced."""
    replaced = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, llama.KVCacheAttention):
                new = CustomOpKVCacheAttention(
                    child.n_heads, child.n_kv_heads, child.head_dim, child.k_cache.shape[2]
                ).to(child.k_cache.dtype)
                setattr(module, name, new)
                replaced += 1
    return replaced

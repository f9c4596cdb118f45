"""Source transforms that put the Gemma 4 decoder on the Vulkan backend's fused ops.

- Every RMSNorm (weighted q/k/layer norms and the weightless v_norm, which gets a constant
  all-ones weight) -> ``et_vk::rms_norm``. Gemma 4 scales by ``weight`` itself (no ``1 + weight``
  form), so the weight passes through unchanged.
- KV caches -> ``llama::update_cache`` (Vulkan's cache-update kernel) on flat [1, S, H, D]
  caches. That op writes a contiguous run at a SymInt start, so sliding layers use a flat
  cache of ``max_context`` slots and their window becomes part of the mask instead of a ring
  buffer. The start comes from ``input_pos[0].item()``, which the Vulkan partitioner turns into
  its ``select_as_symint`` op (Vulkan, unlike MLX, replays data-dependent scalars).
- Attention -> ``et_vk::sdpa`` (fused QK^T, fp32 softmax, AV) over the whole cache with an
  additive mask, which covers causal, sliding-window and KV-shared layers alike. Grouped-query
  heads are folded into the query rows so every call sees equal head counts.
"""

from __future__ import annotations

import torch
from torch import nn

from rne_tools.models import gemma4

# Additive mask value: finite so fp16 cannot overflow into NaN, far below any real score.
MASKED = -30000.0


def _load_ops() -> None:
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (et_vk::rms_norm, et_vk::sdpa)
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama::update_cache)


class VulkanRMSNorm(nn.Module):
    """``et_vk::rms_norm``; the weightless form uses a constant ones weight."""

    def __init__(self, norm: gemma4.RMSNorm, dim: int) -> None:
        super().__init__()
        self.eps = norm.eps
        if norm.weight is not None:
            self.weight = norm.weight
        else:
            self.register_buffer("weight", torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.et_vk.rms_norm(x, self.weight, self.eps)


class VulkanKVCache(gemma4.KVCache):
    """Flat [1, size, H_kv, D] cache written by ``llama::update_cache`` at ``input_pos[0]``."""

    def __init__(self, n_kv_heads: int, size: int, head_dim: int) -> None:
        super().__init__(n_kv_heads, size, head_dim, ring=False)
        self.k = torch.zeros(1, size, n_kv_heads, head_dim)
        self.v = torch.zeros(1, size, n_kv_heads, head_dim)

    def update(
        self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        start = input_pos[0].item()
        torch._check_is_size(start)
        torch._check(start + k.shape[2] <= self.size)
        torch.ops.llama.update_cache(k.transpose(1, 2).contiguous(), self.k, start)
        torch.ops.llama.update_cache(v.transpose(1, 2).contiguous(), self.v, start)
        return self.read()

    def read(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k.transpose(1, 2), self.v.transpose(1, 2)


class VulkanSDPA(nn.Module):
    """``et_vk::sdpa`` with an additive mask; GQA folded into the query rows."""

    def __init__(self, sdpa: gemma4.SDPA) -> None:
        super().__init__()
        self.n_rep, self.scale = sdpa.n_rep, sdpa.scale

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        b, h, t, d = q.shape
        h_kv = k.shape[1]
        # Query head j uses kv head j // n_rep: stack each group's rows under its kv head.
        q = q.contiguous().view(b, h_kv, self.n_rep * t, d)
        bias = (1.0 - mask.to(q.dtype)) * MASKED
        bias = bias.repeat(self.n_rep, 1).expand(b, h_kv, self.n_rep * t, mask.shape[-1])
        out = torch.ops.et_vk.sdpa(q, k, v, bias, self.scale)
        return out.unflatten(2, (self.n_rep, t)).flatten(1, 2)


def apply_vulkan_transforms(model: gemma4.Transformer) -> gemma4.Transformer:
    """Swap RMSNorm, SDPA and caches for their Vulkan-op versions, in place."""
    if not isinstance(model, gemma4.Transformer):
        raise TypeError("the Vulkan source transforms are written for the gemma4 Transformer")
    _load_ops()
    dtype = model.tok_embeddings.weight.dtype
    for key, cache in list(model.caches.items()):
        n_kv_heads, _, head_dim = cache.k.shape[1], cache.k.shape[2], cache.k.shape[3]
        model.caches[key] = VulkanKVCache(n_kv_heads, model.max_context, head_dim).to(dtype)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, gemma4.SDPA):
                setattr(module, name, VulkanSDPA(child))
            elif isinstance(child, gemma4.RMSNorm):
                dim = child.weight.numel() if child.weight is not None else module.head_dim
                setattr(module, name, VulkanRMSNorm(child, dim).to(dtype))
    return model

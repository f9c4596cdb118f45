"""Rewrites of small model pieces into forms the XNNPACK partitioner accepts whole.

XNNPACK takes ``mean.dim`` only over the two innermost dims of a 4-D tensor and no slices of
dynamic-shape tensors. The originals (RMSNorm over the last dim, rotate-half by slicing) would
each end a delegate, splitting every layer into several. The replacements compute the same
values: the norm's mean over a ``[1, N, dim, 1]`` view, the rotation as a linear with a constant
signed permutation (exact in float: entries are 0 and +-1). Llama and Gemma 4 both get them.

Gemma 4's attention (one kv head for eight query heads in E2B) expanded each cache to every
query head before its matmuls: a copy of the whole cache per head, per layer and step, on the
CPU. ``FoldedGqaSDPA`` folds the heads into the query rows instead, and masks by adding a bias
(XNNPACK has no ``where``).

Its full-attention layers (the long caches: ``max_context`` slots of the widest heads) go
further, onto ExecuTorch's LLM custom CPU ops: ``llama::update_cache`` writes the chunk's keys and
values into the cache in place, and ``llama::custom_sdpa`` attends causally over the written
slots ``[0, start + T)`` only. The functional cache write (``index_put`` into a copy, then a
copy back: two copies of the whole cache per layer and step) and the attention over unwritten
slots both go. Sliding layers keep their small ring caches and ``FoldedGqaSDPA``.

ExecuTorch's XNNPACK partitioner takes ``aten.gelu`` without its ``approximate`` argument and
runs the erf GELU, so Gemma 4's tanh-approximated GELU changed (tiny Gemma 4 fp32 logits moved
by 2.7e-2 of their std). ``SigmoidGeluTanh`` writes it as ``x * sigmoid(2u)``, which equals
``x * (1 + tanh(u)) / 2`` and which XNNPACK computes as written.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rne_tools.export.custom_ops import LastWrite, chunk_start
from rne_tools.models import gemma4, llama


class FourDimRMSNorm(nn.Module):
    """RMSNorm over the last dim of a [1, dim], [1, T, dim] or [1, T, H, dim] input. A Llama norm
    scales after the cast back to the input's dtype, a Gemma 4 norm before it (and Gemma's v_norm
    has no weight), as the originals do."""

    def __init__(self, norm: llama.RMSNorm | gemma4.RMSNorm) -> None:
        super().__init__()
        self.eps, self.weight = norm.eps, norm.weight
        self.scale_in_float = isinstance(norm, gemma4.RMSNorm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = x.shape[-1]
        x4 = x.float().reshape(1, -1, dim, 1)
        x4 = x4 * torch.rsqrt((x4 * x4).mean((2, 3), keepdim=True) + self.eps)
        # -1 stands for the dynamic token dim (XNNPACK reshapes with one dynamic dim).
        out = x4.reshape(1, -1, *x.shape[2:]) if x.dim() >= 3 else x4.reshape(1, dim)
        if self.weight is None:
            return out.to(x.dtype)
        if self.scale_in_float:
            return (out * self.weight.float()).to(x.dtype)
        return self.weight * out.to(x.dtype)


class MatmulRotateHalf(nn.Module):
    def __init__(self, head_dim: int) -> None:
        super().__init__()
        half = head_dim // 2
        rotation = torch.zeros(head_dim, head_dim)
        # As a linear weight: out[j] = -x[j + half] for j < half, x[j - half] otherwise.
        rotation[torch.arange(half), torch.arange(half, head_dim)] = -1.0
        rotation[torch.arange(half, head_dim), torch.arange(half)] = 1.0
        self.register_buffer("rotation", rotation, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.linear (not matmul): XNNPACK takes it with any leading dims, dynamic ones included.
        return nn.functional.linear(x, self.rotation.to(x.dtype))


class MatmulRotateRoPE(gemma4.RoPE):
    """Gemma 4's RoPE with its rotate-half as ``MatmulRotateHalf``."""

    def __init__(self, rope: gemma4.RoPE) -> None:
        super().__init__(rope.head_dim, rope.rot_dims, rope.theta, rope.scale)
        self.inv_freq = rope.inv_freq
        self.rotate_half = MatmulRotateHalf(rope.head_dim)

    def forward(self, x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        cos, sin = self.cos_sin(x, input_pos)
        return x * cos + self.rotate_half(x) * sin


class SigmoidGeluTanh(nn.Module):
    """gelu(x, approximate="tanh") = x * sigmoid(2 * sqrt(2 / pi) * (x + 0.044715 x^3))."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u2 = (2.0 * math.sqrt(2.0 / math.pi)) * (x + 0.044715 * x * x * x)
        return x * torch.sigmoid(u2)


# Added to masked scores: exp(score + MASKED - max) is exactly 0 in float32, as with -inf, and a
# finite bias keeps the mask arithmetic (not a select) inside the delegate.
MASKED = -1e30


class FoldedGqaSDPA(nn.Module):
    """``gemma4.SDPA`` with grouped-query heads folded into the query rows: query head j uses kv
    head j // n_rep, so [1, H, T, D] queries are [1, H_kv, n_rep * T, D] against the cache as
    it is, and the [T, S] mask is repeated for each head of a group."""

    def __init__(self, sdpa: gemma4.SDPA) -> None:
        super().__init__()
        self.n_rep, self.scale = sdpa.n_rep, sdpa.scale

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor,
        input_pos: torch.Tensor,
    ) -> torch.Tensor:
        _, h, t, d = q.shape
        h_kv = k.shape[1]
        # Batch 1: matmuls over the kv heads, [H_kv, n_rep * T, D] queries. Split back by view
        # (a reshape of the matmul output left torch.export a stride guard it could not prove
        # for every chunk length).
        q = q.contiguous().view(h_kv, self.n_rep * t, d)
        bias = (~mask).to(torch.float32).repeat(self.n_rep, 1) * MASKED
        # Views, not k[0]: a select is a copy of the whole cache in the portable runtime.
        k, v = (x.view(h_kv, x.shape[2], d) for x in (k, v))
        scores = torch.bmm(q, k.transpose(1, 2)).float() * self.scale + bias
        out = torch.bmm(torch.softmax(scores, dim=-1).to(q.dtype), v)
        return out.view(h_kv, self.n_rep, t, d).reshape(1, h, t, d)


class InPlaceKVCache(LastWrite, gemma4.KVCache):
    """A full-attention cache ``[1, size, H_kv, D]`` written in place by ``llama::update_cache``.

    ``update`` and ``read`` return the cache itself in that layout (a transposed view would be
    a copy of it once lowered), which only ``CustomOpCausalSDPA`` reads.
    """

    def __init__(self, cache: gemma4.KVCache) -> None:
        nn.Module.__init__(self)
        import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama::*)

        if cache.ring:
            raise ValueError("InPlaceKVCache replaces flat (full-attention) caches only")
        _, n_kv_heads, size, head_dim = cache.k.shape
        self.size, self.ring = size, False
        shape = (1, size, n_kv_heads, head_dim)
        self.register_buffer("k", torch.zeros(shape, dtype=cache.k.dtype), persistent=False)
        self.register_buffer("v", torch.zeros(shape, dtype=cache.v.dtype), persistent=False)

    def update(
        self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        seq_len = k.shape[2]
        start = chunk_start(input_pos, seq_len, self.size)
        torch.ops.llama.update_cache(k.transpose(1, 2).contiguous(), self.k, start)
        torch.ops.llama.update_cache(v.transpose(1, 2).contiguous(), self.v, start)
        self.remember_write(start, seq_len)
        return self.k, self.v

    def read(self, input_pos: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k, self.v


class CustomOpCausalSDPA(nn.Module):
    """``gemma4.SDPA`` of a full-attention layer as ``llama::custom_sdpa`` over an
    ``InPlaceKVCache``: query row i (position start + i) sees slots ``[0, start + i]``, which
    is the model's mask for these layers. The kernel groups query heads per kv head itself."""

    def __init__(self, sdpa: gemma4.SDPA, cache: InPlaceKVCache) -> None:
        super().__init__()
        self.scale = sdpa.scale
        # Not a submodule: the cache belongs to the model (and to several layers).
        self._cache = (cache,)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor,
        input_pos: torch.Tensor,
    ) -> torch.Tensor:
        """q [1, H, T, D]; k/v the caches [1, S, H_kv, D] -> [1, H, T, D]."""
        start = self._cache[0].start_of_last(q.shape[2])
        out = torch.ops.llama.custom_sdpa(
            q.transpose(1, 2).to(k.dtype), k, v, start, None, 0.0, True, self.scale
        )
        return out.to(q.dtype).transpose(1, 2)


def use_in_place_full_attention(model: gemma4.Transformer) -> None:
    """Give Gemma 4's full-attention layers ``InPlaceKVCache`` + ``CustomOpCausalSDPA``, in
    place (KV-shared layers read their source's cache through the same SDPA)."""
    args = model.args
    for key, cache in list(model.caches.items()):
        if args.layer_types[int(key)] == gemma4.FULL:
            model.caches[key] = InPlaceKVCache(cache)
    for i, layer in enumerate(model.layers):
        if args.layer_types[i] == gemma4.FULL:
            layer.attention.sdpa = CustomOpCausalSDPA(layer.attention.sdpa, model.cache_for(i))


def use_xnnpack_friendly_modules(model: nn.Module) -> None:
    """Swap RMSNorm, RotateHalf and Gemma 4's RoPE, SDPA, full-attention caches and GELU
    modules for the equivalents above, in place."""
    if isinstance(model, gemma4.Transformer):
        use_in_place_full_attention(model)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, (llama.RMSNorm, gemma4.RMSNorm)):
                setattr(module, name, FourDimRMSNorm(child))
            elif isinstance(child, llama.RotateHalf):
                setattr(module, name, MatmulRotateHalf(module.head_dim))
            elif type(child) is gemma4.RoPE:
                setattr(module, name, MatmulRotateRoPE(child))
            elif type(child) is gemma4.SDPA:
                setattr(module, name, FoldedGqaSDPA(child))
            elif isinstance(child, gemma4.GeluTanh):
                setattr(module, name, SigmoidGeluTanh())

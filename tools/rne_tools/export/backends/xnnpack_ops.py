"""XNNPACK's transform table: building blocks rewritten into forms its partitioner takes whole.

XNNPACK takes ``mean.dim`` only over the two innermost dims of a 4-D tensor and no slices of
dynamic-shape tensors. The originals (RMSNorm over the last dim, rotate-half by slicing) would
each end a delegate, splitting every layer into several. The replacements compute the same
values: the norm's mean over a ``[1, N, dim, 1]`` view, the rotation as a linear with a constant
signed permutation (exact in float: entries are 0 and +-1).

Sliding-window attention (Gemma 4: one kv head for eight query heads in E2B) expanded each cache
to every query head before its matmuls: a copy of the whole cache per head, per layer and step,
on the CPU. ``FoldedGqaSDPA`` folds the heads into the query rows instead, and masks by adding a
bias (XNNPACK has no ``where``).

Full-attention layers (the long caches) go further, onto ExecuTorch's LLM custom CPU ops
(``export.custom_ops``): caches written in place, attention over the written slots only. Sliding
layers keep their small ring caches and ``FoldedGqaSDPA``.

ExecuTorch's XNNPACK partitioner takes ``aten.gelu`` without its ``approximate`` argument and
runs the erf GELU, so the tanh-approximated GELU changed (tiny Gemma 4 fp32 logits moved by
2.7e-2 of their std). ``SigmoidGeluTanh`` writes it as ``x * sigmoid(2u)``, which equals
``x * (1 + tanh(u)) / 2`` and which XNNPACK computes as written.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from rne_tools.export.custom_ops import custom_op_sdpa, in_place_caches
from rne_tools.export.transforms import apply_replacements
from rne_tools.models import layers


class FourDimRMSNorm(nn.Module):
    """RMSNorm over the last dim of a [1, dim], [1, T, dim] or [1, T, H, dim] input, scaled
    before or after the cast back (and weightless) as the original."""

    def __init__(self, norm: layers.RMSNorm) -> None:
        super().__init__()
        self.eps, self.weight, self.scale_in_float = norm.eps, norm.weight, norm.scale_in_float

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
    def __init__(self, rotate_half: layers.RotateHalf) -> None:
        super().__init__()
        head_dim = rotate_half.dim
        half = head_dim // 2
        rotation = torch.zeros(head_dim, head_dim)
        # As a linear weight: out[j] = -x[j + half] for j < half, x[j - half] otherwise.
        rotation[torch.arange(half), torch.arange(half, head_dim)] = -1.0
        rotation[torch.arange(half, head_dim), torch.arange(half)] = 1.0
        self.register_buffer("rotation", rotation, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.linear (not matmul): XNNPACK takes it with any leading dims, dynamic ones included.
        return nn.functional.linear(x, self.rotation.to(x.dtype))


class SigmoidGeluTanh(nn.Module):
    """gelu(x, approximate="tanh") = x * sigmoid(2 * sqrt(2 / pi) * (x + 0.044715 x^3))."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u2 = (2.0 * math.sqrt(2.0 / math.pi)) * (x + 0.044715 * x * x * x)
        return x * torch.sigmoid(u2)


# Added to masked scores: exp(score + MASKED - max) is exactly 0 in float32, as with -inf, and a
# finite bias keeps the mask arithmetic (not a select) inside the delegate.
MASKED = -1e30


class FoldedGqaSDPA(layers.SDPA):
    """Masked SDPA with grouped-query heads folded into the query rows: query head j uses kv
    head j // n_rep, so [1, H, T, D] queries are [1, H_kv, n_rep * T, D] against the cache as
    it is, and the [T, S] mask is repeated for each head of a group."""

    def __init__(self, sdpa: layers.SDPA) -> None:
        super().__init__(sdpa.spec)
        self.n_rep = sdpa.spec.n_heads // sdpa.spec.n_kv_heads
        self.scale = sdpa.spec.scale if sdpa.spec.scale is not None else sdpa.spec.head_dim**-0.5

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
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
        out = out.view(h_kv, self.n_rep, t, d).reshape(1, h, t, d)
        return out.transpose(1, 2).reshape(1, t, h * d)


def apply_xnnpack_transforms(model: nn.Module, cache_dtype: torch.dtype | None = None) -> nn.Module:
    """Apply XNNPACK's table in place: full-attention caches (in ``cache_dtype``, default
    their own) and SDPA on the custom ops, sliding SDPA folded, the norm over a 4-D view,
    rotate-half as a linear and the tanh GELU through a sigmoid."""

    def sdpa(s: layers.SDPA) -> layers.SDPA:
        return FoldedGqaSDPA(s) if s.spec.window is not None else custom_op_sdpa(model, s)

    apply_replacements(
        model,
        {
            layers.KVCache: in_place_caches(cache_dtype),
            layers.SDPA: sdpa,
            layers.RMSNorm: FourDimRMSNorm,
            layers.RotateHalf: MatmulRotateHalf,
            layers.GeluTanh: lambda _: SigmoidGeluTanh(),
        },
    )
    return model

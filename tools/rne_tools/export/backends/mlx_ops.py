"""MLX's transform table: the Gemma 4 decoder's building blocks on the MLX backend's fused ops.

- RoPE -> ``rne_mlx::rope``: MLX's fused rope (``mx.fast.rope``) with the position offset taken
  from the ``input_pos`` *tensor*. The wheel's ``mlx::rope`` only takes an int offset, which
  forces ``input_pos.item()`` into the graph; the MLX schema's ``RopeNode.offset`` also accepts
  a tensor, so we register our op and a builder handler that emits exactly that.
- Attention -> ``mlx::custom_sdpa``. Full-attention layers attend over the written slots of their
  flat cache only, ``[0, start + T)`` (``MLXFlatCache``), with MLX's causal mask, so decode cost
  follows the tokens in the cache, not ``max_context``. Sliding layers attend over their whole
  ring (window-sized, so already bounded) with an additive mask that carries the positions.
- RMSNorm (weighted q/k norms and the weightless v_norm) -> ``aten.rms_norm`` (MLX RMSNormNode).
- KV caches keep their tensor-indexed ``index_copy_`` (MLX's INDEX_COPY pattern). A flat cache's
  span end is a SymInt read from the graph input ``input_pos`` (one ``ItemIntNode`` per written
  flat cache; KV-shared layers reuse the writer's, ``LastWrite``).

Full-attention layers rotate only ``rope_dims`` of ``head_dim``, pairing dims ``(i, i+D/2)``;
``mx.fast.rope`` rotates the first ``dims`` dims pairing ``(i, i+dims/2)``. The transform
permutes the q/k projection rows (and q/k norm weights) so the rotated dims come first, which
leaves q.k unchanged, and rescales the base so the frequencies match.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rne_tools.export.custom_ops import LastWrite, chunk_start
from rne_tools.export.transforms import apply_replacements
from rne_tools.models import layers

_lib = torch.library.Library("rne_mlx", "DEF")
_lib.define(
    "rope(Tensor x, int dims, Tensor offset, bool traditional, float base, float scale) -> Tensor"
)


def rope_reference(
    x: torch.Tensor,
    dims: int,
    offset: torch.Tensor,
    traditional: bool,
    base: float,
    scale: float,
) -> torch.Tensor:
    """What ``mx.fast.rope(x, dims, traditional, base, scale, offset)`` computes on [B, H, T, D]:
    angle(t, i) = (offset + t) * scale * base ** (-2i / dims); dims past ``dims`` pass through."""
    seq_len = x.shape[-2]
    pos = (offset.reshape(-1)[:1] + torch.arange(seq_len, device=x.device)).float() * scale
    inv_freq = base ** (-torch.arange(0, dims, 2, dtype=torch.float32, device=x.device) / dims)
    angles = pos[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    rot, rest = x[..., :dims], x[..., dims:]
    if traditional:
        a, b = rot[..., 0::2], rot[..., 1::2]
        rotated = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    else:
        a, b = rot[..., : dims // 2], rot[..., dims // 2 :]
        rotated = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    return torch.cat([rotated, rest], dim=-1)


_lib.impl("rope", rope_reference, "CompositeExplicitAutograd")


@torch.library.register_fake("rne_mlx::rope")
def _rope_fake(x, dims, offset, traditional, base, scale):  # noqa: ANN001, ANN202
    return torch.empty_like(x)


def load_mlx_ops() -> None:
    """Register the wheel's MLX custom ops (``mlx::custom_sdpa``); needs the generated schema."""
    from rne_tools.export.backends import mlx_schema

    mlx_schema.install()
    import executorch.backends.mlx.custom_ops  # noqa: F401


def register_mlx_handlers() -> None:
    """Teach the MLX program builder ``rne_mlx::rope`` (RopeNode with a tensor offset)."""
    load_mlx_ops()
    from executorch.backends.mlx.builder.op_registry import REGISTRY

    target = torch.ops.rne_mlx.rope.default
    if getattr(register_mlx_handlers, "done", False):
        return

    @REGISTRY.register(target=[target])
    def _rope_handler(P, n):  # noqa: ANN001, ANN202, N803
        from executorch.backends.mlx.serialization.mlx_graph_schema import RopeNode, VidOrTid

        x, dims, offset, traditional, base, scale = P.args(n)
        out = P.make_or_get_slot(n)
        P.emit(
            RopeNode(
                x=P.slot_to_tid(x),
                out=P.slot_to_tid(out),
                dims=dims,
                offset=VidOrTid.from_tid(P.slot_to_tid(offset)),
                freqs=None,
                traditional=traditional,
                base=base,
                scale=scale,
            )
        )
        return out

    register_mlx_handlers.done = True


class MLXRoPE(nn.Module):
    """RoPE through ``rne_mlx::rope``; expects rotated dims first (see ``permute_partial_rope``)."""

    def __init__(self, rope: layers.RoPE) -> None:
        super().__init__()
        self.dims = rope.rot_dims
        # theta ** (-2i / head_dim) == (theta ** (dims / head_dim)) ** (-2i / dims)
        self.base = rope.theta ** (rope.rot_dims / rope.head_dim)
        self.scale = rope.scale

    def forward(self, x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        return torch.ops.rne_mlx.rope(x, self.dims, input_pos, False, self.base, self.scale)


class MLXFlatCache(LastWrite, layers.KVCache):
    """A full-attention layer's flat cache (slot = position) that returns only the slots written
    so far, ``[0, start + T)``: attention then costs what the cache holds."""

    def update(self, input_pos: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        seq_len = k.shape[2]
        start = chunk_start(input_pos, seq_len, self.size)
        super().update(input_pos, k, v)
        self.remember_write(start, seq_len)
        return self._written_slots(start + seq_len)

    def read(self, input_pos: Tensor, seq_len: int) -> tuple[Tensor, Tensor]:
        # KV-shared layers' input_pos is computed, and MLX reads scalars of graph inputs only.
        return self._written_slots(self.start_of_last(seq_len) + seq_len)

    def _written_slots(self, end: int) -> tuple[Tensor, Tensor]:
        return self.k[:, :, :end], self.v[:, :, :end]


def _flat_cache_bounded(cache: layers.KVCache) -> layers.KVCache:
    if cache.ring:
        return cache
    n_kv_heads, head_dim = cache.k.shape[1], cache.k.shape[3]
    return MLXFlatCache(n_kv_heads, cache.size, head_dim, None).to(cache.k.dtype)


class MLXSDPA(layers.SDPA):
    """``mlx::custom_sdpa`` (GQA handled by MLX): full layers causally over the written slots
    ``MLXFlatCache`` returns, sliding layers over their ring with an additive mask."""

    def __init__(self, sdpa: layers.SDPA) -> None:
        super().__init__(sdpa.spec)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        b, h, t, d = q.shape
        # custom_sdpa attends over key[:start_pos + T]: with this start_pos, all it is given.
        start_pos = k.shape[2] - t
        if self.spec.window is None:
            # The span ends at the chunk's last position; MLX's causal mask aligns the last
            # query row with the last key.
            out = torch.ops.mlx.custom_sdpa(q, k, v, start_pos, None, 0.0, True, self.spec.scale)
        else:
            # A ring's slots are not in position order: the mask carries the positions.
            bias = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
            out = torch.ops.mlx.custom_sdpa(q, k, v, start_pos, bias, 0.0, False, self.spec.scale)
        return out.transpose(1, 2).reshape(b, t, h * d)


class MLXRMSNorm(nn.Module):
    """RMSNorm as ``aten.rms_norm`` (MLX RMSNormNode); ``weight`` None is the v_norm form."""

    def __init__(self, norm: layers.RMSNorm) -> None:
        super().__init__()
        self.eps = norm.eps
        self.weight = norm.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def _rotated_first(head_dim: int, rot_dims: int) -> torch.Tensor:
    """Permutation of a head's dims putting the rotated pairs (i, i+D/2), i < rot/2, first."""
    half, r = head_dim // 2, rot_dims // 2
    return torch.cat(
        [
            torch.arange(0, r),
            torch.arange(half, half + r),
            torch.arange(r, half),
            torch.arange(half + r, head_dim),
        ]
    )


@torch.no_grad()
def _permute_rows(linear: nn.Linear, perm: torch.Tensor, heads: int) -> None:
    w = linear.weight.view(heads, perm.numel(), -1)
    linear.weight.copy_(w[:, perm].reshape_as(linear.weight))


@torch.no_grad()
def permute_partial_rope(model: nn.Module) -> None:
    """Reorder q/k head dims of partially rotated layers so MLX's rope can rotate a prefix."""
    args = model.args
    for i, layer in enumerate(model.layers):
        attn = layer.attention
        rope = attn.rope
        if rope.rot_dims == rope.head_dim:
            continue
        perm = _rotated_first(rope.head_dim, rope.rot_dims)
        _permute_rows(attn.wq, perm, attn.n_heads)
        attn.q_norm.weight.copy_(attn.q_norm.weight[perm])
        if not attn.shared:
            _permute_rows(attn.wk, perm, attn.n_kv_heads)
            attn.k_norm.weight.copy_(attn.k_norm.weight[perm])
        if args.k_eq_v[args.kv_source[i]]:
            # Values are the (now permuted) keys: un-permute them in the output projection.
            w = attn.wo.weight.view(args.dim, attn.n_heads, rope.head_dim)
            attn.wo.weight.copy_(w[:, :, perm].reshape_as(attn.wo.weight))


def apply_mlx_transforms(model: nn.Module) -> nn.Module:
    """Apply MLX's table (caches, RoPE, SDPA and RMSNorm on MLX ops) in place, after reordering the
    partially rotated heads' dims for MLX's rope."""
    load_mlx_ops()
    permute_partial_rope(model)
    apply_replacements(
        model,
        {
            layers.KVCache: _flat_cache_bounded,
            layers.RoPE: MLXRoPE,
            layers.SDPA: MLXSDPA,
            layers.RMSNorm: MLXRMSNorm,
        },
    )
    return model

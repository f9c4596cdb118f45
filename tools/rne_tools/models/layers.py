"""Building blocks the decoders compose: RMSNorm, RoPE, the KV caches and the attention step.

Each architecture file (``llama.py``, ``gemma4.py``) builds its layers from these, so a backend's
source transforms (``export/backends/*_ops.py``) name building blocks, not architectures: a
transform table maps a class below to its replacement, applied by
``rne_tools.export.transforms.apply_replacements``.

Declared interfaces, which replacements implement:

- ``KVCache``: ``update(input_pos, k, v)`` writes a chunk's keys/values and returns what its
  queries attend over; ``read(input_pos, seq_len)`` is the same for a layer that shares the
  cache without writing it.
- ``SDPA``: ``forward(q, k, v, mask, input_pos)`` attends a chunk's queries over those keys and
  values; its ``spec`` (an ``AttentionSpec``) declares the layer's facts a backend needs (window,
  which layer's cache it reads) so that no transform has to detect them.
"""

from __future__ import annotations

import abc
import contextlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# Random weights are drawn this many elements at a time: E2B's per-layer table would otherwise
# need two float32 temporaries of 9.4 GB each. Chunks of a multiple of 16 rows keep the
# generator's stream identical to drawing the tensor in one piece.
_INIT_CHUNK = 1 << 24


def chunk_problem(max_chunk: int, max_context: int) -> str | None:
    """Why a prefill chunk of ``max_chunk`` tokens cannot run over a ``max_context``-slot KV
    cache, or None: the one statement of that rule (export plans, models, the registry)."""
    if max_context < 1 or max_chunk < 1:
        return f"max chunk ({max_chunk}) and max context ({max_context}) must be >= 1"
    if max_chunk > max_context:
        return (f"max chunk ({max_chunk}) is above max context ({max_context}): a prefill chunk "
                "must fit in the KV cache")
    return None


class RMSNorm(nn.Module):
    """RMSNorm over the last dim, normalised in float32 like the references.

    ``with_scale=False`` has no weight (Gemma's v_norm). ``scale_in_float`` multiplies by the
    weight before the cast back to the input's dtype (Gemma) instead of after it (Llama); the
    two differ in 16-bit dtypes, and each matches its reference there.
    """

    def __init__(
        self, dim: int, eps: float, *, with_scale: bool = True, scale_in_float: bool = False
    ) -> None:
        super().__init__()
        self.dim, self.eps, self.scale_in_float = dim, eps, scale_in_float
        self.weight = nn.Parameter(torch.ones(dim)) if with_scale else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.weight is None:
            return out.type_as(x)
        if self.scale_in_float:
            return (out * self.weight.float()).type_as(x)
        return self.weight * out.to(x.dtype)


def rope_inv_freq(
    head_dim: int,
    theta: float,
    rot_dims: int | None = None,
    scale: float = 1.0,
) -> torch.Tensor:
    """Frequencies ``[head_dim // 2]`` of split-half RoPE: ``theta ** (-2i / head_dim) * scale``
    for the first ``rot_dims // 2`` pairs and 0 (no rotation) for the rest (partial rotary)."""
    rot_dims = head_dim if rot_dims is None else rot_dims
    inv_freq = torch.zeros(head_dim // 2)
    i = torch.arange(rot_dims // 2, dtype=torch.float32)
    inv_freq[: rot_dims // 2] = theta ** (-2.0 * i / head_dim) * scale
    return inv_freq


def rope_tables(head_dim: int, max_context: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables ``[max_context, head_dim]`` (angles in float64, stored in float32) for a
    model that looks its positions up instead of computing them in the graph. (``1 / theta **
    e`` is not ``theta ** -e`` to the last float64 bit, which can flip a float32 rounding.)"""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(max_context, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


class RotateHalf(nn.Module):
    """``[x1, x2] -> [-x2, x1]`` over the last dim (the split-half RoPE layout). A module so
    backends can swap in an equivalent that their delegate accepts."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotate_half: nn.Module
) -> torch.Tensor:
    """x: [1, H, T, D]; cos/sin: [T, D]."""
    return x * cos + rotate_half(x) * sin


class RoPE(nn.Module):
    """Split-half RoPE at the chunk's positions ``input_pos + arange(T)``, computed in the graph.

    Frequencies as ``rope_inv_freq`` (transformers' "default" and "proportional" RoPE); pairs are
    ``(i, i + head_dim // 2)``. ``forward(x, input_pos)`` is the interface fused backend kernels
    replace; ``rotate_half`` is the step simpler rewrites replace.
    """

    def __init__(
        self, head_dim: int, theta: float, rot_dims: int | None = None, scale: float = 1.0
    ) -> None:
        super().__init__()
        self.head_dim, self.theta, self.scale = head_dim, theta, scale
        self.rot_dims = head_dim if rot_dims is None else rot_dims
        self.register_buffer(
            "inv_freq", rope_inv_freq(head_dim, theta, self.rot_dims, scale), persistent=False
        )
        self.rotate_half = RotateHalf(head_dim)

    def cos_sin(
        self, x: torch.Tensor, input_pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [T, head_dim] of the chunk's positions, in ``x``'s dtype."""
        seq_len = x.shape[2]
        pos = (input_pos + torch.arange(seq_len, device=x.device)).float()
        # inv_freq stays float32 when a model is cast to 16 bits (the models' to_dtype).
        angles = pos[:, None] * self.inv_freq[None, :]
        cos = torch.cat([angles.cos(), angles.cos()], dim=-1).to(x.dtype)
        sin = torch.cat([angles.sin(), angles.sin()], dim=-1).to(x.dtype)
        return cos, sin

    def forward(self, x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` of shape [B, H, T, head_dim]."""
        cos, sin = self.cos_sin(x, input_pos)
        return apply_rope(x, cos, sin, self.rotate_half)


class KVCache(nn.Module):
    """Static key/value cache [1, H_kv, size, D] written with tensor-indexed ``index_copy_``.

    ``window`` None: a flat cache, position p in slot p. Otherwise the layer attends over a
    sliding window and the cache is a ring: position p in slot ``p % size``.
    """

    def __init__(self, n_kv_heads: int, size: int, head_dim: int, window: int | None) -> None:
        super().__init__()
        self.size, self.window = size, window
        shape = (1, n_kv_heads, size, head_dim)
        self.register_buffer("k", torch.zeros(shape), persistent=False)
        self.register_buffer("v", torch.zeros(shape), persistent=False)

    @property
    def ring(self) -> bool:
        return self.window is not None

    def slots(self, input_pos: torch.Tensor, seq_len: int) -> torch.Tensor:
        """Cache slots written by a chunk of ``seq_len`` tokens starting at ``input_pos``."""
        pos = input_pos + torch.arange(seq_len, device=input_pos.device)
        return torch.remainder(pos, self.size) if self.ring else pos

    def update(
        self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v [1, H_kv, T, D] and return the keys and values the chunk attends over
        (here the whole cache)."""
        slots = self.slots(input_pos, k.shape[2])
        self.k.index_copy_(2, slots, k)
        self.v.index_copy_(2, slots, v)
        return self.k, self.v

    def read(self, input_pos: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values a KV-shared layer's chunk attends over: the whole cache here
        (backends whose caches keep a narrower span use the chunk's positions)."""
        return self.k, self.v

    def slot_positions(self, last_pos: torch.Tensor) -> torch.Tensor:
        """Absolute position held by each slot once position ``last_pos`` [1] is written
        (negative = never written)."""
        j = torch.arange(self.size, device=last_pos.device)
        if not self.ring:
            return j
        return last_pos - torch.remainder(last_pos - j, self.size)


class Decoder(nn.Module):
    """What every architecture's top module shares: its KV capacity and prefill chunk, checked
    against each other once, and the switch ``returning_every_position`` sets."""

    # Set while the ``verify`` method is traced (``returning_every_position``).
    every_position_logits = False

    def __init__(self, args: Any, max_context: int, max_chunk: int) -> None:
        super().__init__()
        if problem := chunk_problem(max_chunk, max_context):
            raise ValueError(problem + ".")
        self.args, self.max_context, self.max_chunk = args, max_context, max_chunk


@contextlib.contextmanager
def returning_every_position(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` returning the logits of every position of a chunk ``[1, T, vocab]`` instead of
    the last one's: what a speculative-decoding ``verify`` method computes (docs/design.md)."""
    model.every_position_logits = True
    try:
        yield model
    finally:
        del model.every_position_logits  # back to the class's False


def reset_caches(model: nn.Module) -> None:
    """Zero every KV cache of ``model`` (every ``KVCache``, backends' replacements included)."""
    for cache in model.modules():
        if isinstance(cache, KVCache):
            cache.k.zero_()
            cache.v.zero_()


@dataclass(frozen=True)
class AttentionSpec:
    """The facts of one attention layer that backends need, declared by the model."""

    layer: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    scale: float | None  # None: 1 / sqrt(head_dim)
    window: int | None  # sliding window; None = full (causal) attention
    kv_source: int  # the layer whose cache it reads (itself unless it shares another's)

    @property
    def shares_kv(self) -> bool:
        return self.kv_source != self.layer


class SDPA(nn.Module, abc.ABC):
    """The attention step of one layer, the interface backends' replacements implement.

    ``forward(q [1, H, T, D], k/v from the cache, mask [T, S] bool, input_pos [1])`` returns
    ``[1, T, H * D]``, ready for the output projection. ``mask`` says which slots each query
    sees; ``input_pos`` (the chunk's first position) is for kernels that bound attention by
    position instead.
    """

    def __init__(self, spec: AttentionSpec) -> None:
        super().__init__()
        self.spec = spec

    @abc.abstractmethod
    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor: ...


class TorchSDPA(SDPA):
    """``F.scaled_dot_product_attention`` over the whole cache (grouped-query heads included)."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=True, scale=self.spec.scale
        )
        return out.transpose(1, 2).reshape(1, -1, self.spec.n_heads * self.spec.head_dim)


class MatmulSDPA(SDPA):
    """Attention written out: kv heads expanded to the query heads, scores and softmax in
    float32, masked slots at -inf."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        b, h, t, d = q.shape
        n_rep = h // k.shape[1]
        if n_rep > 1:
            _, h_kv, s, _ = k.shape
            k = k[:, :, None].expand(b, h_kv, n_rep, s, d).reshape(b, h, s, d)
            v = v[:, :, None].expand(b, h_kv, n_rep, s, d).reshape(b, h, s, d)
        scale = self.spec.scale if self.spec.scale is not None else d**-0.5
        scores = (q @ k.transpose(-1, -2)).float() * scale
        scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.softmax(scores, dim=-1).to(q.dtype) @ v
        return out.transpose(1, 2).reshape(b, t, h * d)


class GeluTanh(nn.Module):
    """Tanh-approximated GELU (``gelu_pytorch_tanh``). A module so backends can swap in an
    equivalent their delegate computes exactly."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


class Softcap(nn.Module):
    """``cap * tanh(x / cap)``: bounds logits to (-cap, cap) (Gemma's final logits). A module so a
    backend can place it with the head it follows."""

    def __init__(self, cap: float) -> None:
        super().__init__()
        self.cap = cap

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x / self.cap) * self.cap


def like_trained_blocks(shape: tuple[int, ...], generator: torch.Generator) -> Iterator[Tensor]:
    """Seeded random float32 values of a trained model's rough scale for a parameter of
    ``shape``, in blocks of its leading rows (a vector in one block): vectors (norm weights)
    around 1, not exactly 1; matrices ``randn / sqrt(fan_in)``. The one random initialisation of
    this package: our models, the transformers references and the benchmark's GGUF writer all
    draw through it."""
    if len(shape) == 1:
        yield 1.0 + 0.1 * torch.randn(shape, generator=generator)
        return
    step = max(16, _INIT_CHUNK // math.prod(shape[1:]) // 16 * 16)
    for start in range(0, shape[0], step):
        rows = (min(step, shape[0] - start), *shape[1:])
        yield torch.randn(rows, generator=generator) / math.sqrt(shape[-1])


@torch.no_grad()
def init_like_trained(parameters: nn.Module | Iterable[Tensor], generator: torch.Generator) -> None:
    """Fill every parameter (of a module, or each of a list) with ``like_trained_blocks``."""
    params = parameters.parameters() if isinstance(parameters, nn.Module) else parameters
    for p in params:
        start = 0
        for block in like_trained_blocks(tuple(p.shape), generator):
            p[start : start + block.shape[0]].copy_(block)
            start += block.shape[0]

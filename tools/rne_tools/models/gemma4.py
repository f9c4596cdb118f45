"""Gemma 4 text decoder (E2B and family), written for export.

One forward call takes a chunk of ``T`` tokens at absolute positions ``input_pos .. input_pos+T-1``
and returns the logits of the last one. Everything that depends on the position is computed from
the ``input_pos`` tensor (no ``.item()``), so one exported graph serves prefill chunks and decode.

Architecture, as in transformers' ``Gemma4ForCausalLM``:

- layers follow ``layer_types``: sliding-window attention (window ``W``, full RoPE) or full
  attention (larger head_dim, "proportional" RoPE rotating only ``partial_rotary_factor`` of it);
- q_norm / k_norm are weighted RMSNorms, v_norm has no weight; attention scale is 1.0;
- per-layer embeddings (PLE): every layer gets a small extra input built from a token table and a
  projection of the embedded prompt, gated into the residual stream after the MLP;
- the last ``num_kv_shared_layers`` layers compute no keys/values: they attend over the cache of
  the last earlier layer of the same type, and (optionally) have a double-wide MLP;
- ``layer_scalar`` scales each layer's output; the final logits are soft-capped with tanh.

Caches: full layers keep a flat cache of ``max_context`` slots. Sliding layers keep a ring buffer of
``W + max_chunk - 1`` slots: after writing a chunk of ``T <= max_chunk`` tokens the ring still holds
the ``W - 1`` keys before the chunk's first token, which is all any query of the chunk may see.
Shared layers own no cache. Norms, RoPE, caches and attention are the shared building blocks of
``models.layers``, which backend source transforms swap for their custom ops; each attention
layer declares its window and KV source (``layers.AttentionSpec``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from rne_tools.errors import CheckpointError
from rne_tools.models.layers import (
    AttentionSpec,
    Decoder,
    GeluTanh,
    KVCache,
    MatmulSDPA,
    RMSNorm,
    RoPE,
    Softcap,
    init_like_trained,
)

SLIDING = "sliding_attention"
FULL = "full_attention"
_HALF_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class ModelArgs:
    """Shape and hyper-parameters of one Gemma 4 text decoder (per-layer values as tuples)."""

    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    layer_types: tuple[str, ...]
    head_dims: tuple[int, ...]  # per layer: sliding and full layers differ
    n_kv_heads: tuple[int, ...]  # per layer
    ffn_dims: tuple[int, ...]  # per layer: doubled on KV-shared layers with use_double_wide_mlp
    kv_source: tuple[int, ...]  # per layer: the layer whose cache it reads (itself if not shared)
    k_eq_v: tuple[bool, ...]  # per layer: values reuse the key projection (no v_proj)
    sliding_window: int
    rope_theta: dict[str, float]  # per layer type
    rope_dims: dict[str, int]  # per layer type: rotated dims (the rest pass through)
    rope_scale: dict[str, float]  # per layer type: inverse of the frequency "factor"
    norm_eps: float
    final_softcap: float | None
    ple_dim: int  # per-layer-embedding width (0 = no PLE)
    ple_vocab_size: int
    # The per-layer table is most of the model (E2B: 2.35B of 4.63B parameters) and is only looked
    # up, so it stays in the checkpoint's 16-bit dtype (lossless) instead of being widened.
    ple_dtype: torch.dtype
    tie_word_embeddings: bool
    bos_id: int | None
    eos_ids: tuple[int, ...]
    pad_id: int | None
    # Ids of the soft tokens whose embeddings an encoder supplies (image, audio), in a config with
    # vision/audio towers; the program then takes those embeddings as an input. Empty: text only.
    media_token_ids: tuple[int, ...] = ()

    @property
    def first_shared_layer(self) -> int:
        """Index of the first layer that reads another layer's cache (n_layers if none)."""
        shared = [i for i in range(self.n_layers) if self.kv_source[i] != i]
        return shared[0] if shared else self.n_layers

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> ModelArgs:
        """Parse an HF ``config.json`` dict (``gemma4_text``, or ``gemma4`` with a ``text_config``)."""
        from transformers import Gemma4TextConfig

        model_type = cfg.get("model_type")
        stored = cfg.get("dtype") or cfg.get("torch_dtype")
        media_token_ids: tuple[int, ...] = ()
        if model_type == "gemma4":
            media_token_ids = _media_token_ids(cfg)
            cfg = cfg.get("text_config") or {}
            model_type = cfg.get("model_type", "gemma4_text")
            stored = cfg.get("dtype") or cfg.get("torch_dtype") or stored
        if model_type != "gemma4_text":
            raise CheckpointError(
                f"config.json has model_type {model_type!r}, but the gemma4 architecture needs "
                "'gemma4_text' (or 'gemma4' with a text_config). Pick the architecture matching "
                "the checkpoint."
            )
        fields = {k: v for k, v in cfg.items() if k not in ("model_type", "transformers_version")}
        try:
            c = Gemma4TextConfig(**fields)
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"config.json is not a valid Gemma4TextConfig: {e}") from e
        if c.enable_moe_block:
            raise CheckpointError(
                "This Gemma 4 checkpoint uses mixture-of-experts blocks (enable_moe_block), which "
                "this decoder does not implement; use a dense Gemma 4 (e.g. E2B, E4B)."
            )
        if media_token_ids and c.use_bidirectional_attention == "vision":
            raise CheckpointError(
                "This checkpoint attends bidirectionally within each image "
                "(use_bidirectional_attention='vision'); this decoder attends causally over image "
                "tokens. Export it without its vision tower (a text-only config) or extend the "
                "decoder with a block mask input."
            )
        if c.use_bidirectional_attention == "all":
            raise CheckpointError(
                "use_bidirectional_attention='all' is not a causal decoder; it cannot be exported "
                "as an LLM."
            )
        if c.hidden_activation != "gelu_pytorch_tanh":
            raise CheckpointError(
                f"hidden_activation {c.hidden_activation!r} is not supported (gelu_pytorch_tanh)."
            )
        if c.attention_bias:
            raise CheckpointError("attention_bias=True is not supported by this decoder.")

        n = c.num_hidden_layers
        types = tuple(c.layer_types)
        unknown = sorted(set(types) - {SLIDING, FULL})
        if unknown:
            raise CheckpointError(f"Unknown layer types {unknown}; expected {SLIDING!r}/{FULL!r}.")
        modes = c.kv_sharing_modes
        kv_source = []
        for i in range(n):
            if modes[i] == "reuse":
                producers = [j for j in range(i) if types[j] == types[i] and modes[j] != "reuse"]
                kv_source.append(producers[-1])
            else:
                kv_source.append(i)

        rope_theta, rope_dims, rope_scale = {}, {}, {}
        for t in sorted(set(types)):
            params = c.rope_parameters[t]
            head_dim = c.per_layer_config[t].head_dim
            rope_type = params.get("rope_type", "default")
            if rope_type not in ("default", "proportional"):
                raise CheckpointError(
                    f"RoPE type {rope_type!r} for {t} is not supported (default, proportional)."
                )
            factor = float(params.get("factor", 1.0)) if rope_type == "proportional" else 1.0
            partial = float(params.get("partial_rotary_factor", 1.0))
            if rope_type == "default" and partial != 1.0:
                raise CheckpointError(
                    f"partial rotary with rope_type 'default' ({t}) is not supported."
                )
            rope_theta[t] = float(params["rope_theta"])
            rope_dims[t] = 2 * int(partial * head_dim // 2)
            rope_scale[t] = 1.0 / factor

        head_dims = tuple(c.per_layer_config[i].head_dim for i in range(n))
        n_kv_heads = tuple(c.per_layer_config[i].num_key_value_heads for i in range(n))
        double = [c.use_double_wide_mlp and modes[i] == "reuse" for i in range(n)]
        eos = c.eos_token_id
        eos_ids = tuple(eos) if isinstance(eos, list | tuple) else (() if eos is None else (eos,))
        return cls(
            vocab_size=c.vocab_size,
            dim=c.hidden_size,
            n_layers=n,
            n_heads=c.num_attention_heads,
            layer_types=types,
            head_dims=head_dims,
            n_kv_heads=n_kv_heads,
            ffn_dims=tuple(c.intermediate_size * (2 if d else 1) for d in double),
            kv_source=tuple(kv_source),
            k_eq_v=tuple(bool(c.attention_k_eq_v) and t == FULL for t in types),
            sliding_window=c.sliding_window,
            rope_theta=rope_theta,
            rope_dims=rope_dims,
            rope_scale=rope_scale,
            norm_eps=c.rms_norm_eps,
            final_softcap=c.final_logit_softcapping,
            ple_dim=c.hidden_size_per_layer_input or 0,
            ple_vocab_size=c.vocab_size_per_layer_input,
            ple_dtype=_HALF_DTYPES.get(str(stored).removeprefix("torch."), torch.float32),
            tie_word_embeddings=c.tie_word_embeddings,
            bos_id=c.bos_token_id,
            eos_ids=eos_ids,
            pad_id=c.pad_token_id,
            media_token_ids=media_token_ids,
        )


def _media_token_ids(cfg: dict[str, Any]) -> tuple[int, ...]:
    """The soft-token ids of the encoders a multimodal ``gemma4`` config declares."""
    from transformers import Gemma4Config

    defaults = Gemma4Config()
    ids = []
    for tower, token in (("vision_config", "image_token_id"), ("audio_config", "audio_token_id")):
        if cfg.get(tower) is not None:
            ids.append(int(cfg.get(token, getattr(defaults, token))))
    return tuple(ids)


def text_config(**overrides: Any) -> dict[str, Any]:
    """A Gemma 4 text config: the tiny model's widths, E2B's special tokens, RoPE and norm, each
    overridable (the benchmarks' E2B config overrides the widths)."""
    cfg: dict[str, Any] = {
        "model_type": "gemma4_text",
        "vocab_size": 256,
        "vocab_size_per_layer_input": 256,
        "hidden_size": 64,
        "hidden_size_per_layer_input": 8,
        "intermediate_size": 96,
        "num_hidden_layers": 8,
        # 3 shared layers at the end: they read layer 2 (full) and layer 4 (sliding).
        "layer_types": [SLIDING, SLIDING, FULL, SLIDING, SLIDING, FULL, SLIDING, FULL],
        "num_kv_shared_layers": 3,
        "use_double_wide_mlp": True,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "global_head_dim": 32,
        "sliding_window": 6,
        "final_logit_softcapping": 5.0,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "bos_token_id": 2,
        "eos_token_id": [1, 106],
        "pad_token_id": 0,
        "rope_parameters": {
            SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
            FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
        },
    }
    cfg.update(overrides)
    return cfg


# Tiny configs exercising every feature; the window is small so prompts longer than it are cheap.
RANDOM_CONFIGS: dict[str, dict[str, Any]] = {
    # E2B's shape in miniature: GQA, sliding + full, PLE, KV sharing, double-wide MLP, softcap.
    "tiny": text_config(),
    # E2B's single KV head, a 1:1 pattern, values = keys on full layers (attention_k_eq_v).
    "tiny_mqa": text_config(
        num_key_value_heads=1,
        num_hidden_layers=6,
        layer_types=[SLIDING, FULL, SLIDING, FULL, SLIDING, FULL],
        num_kv_shared_layers=2,
        sliding_window=5,
        attention_k_eq_v=True,
        eos_token_id=1,
    ),
}


def _norm(dim: int, eps: float, with_scale: bool = True) -> RMSNorm:
    """Gemma's RMSNorm: scaled by its weight in float32, before the cast back."""
    return RMSNorm(dim, eps, with_scale=with_scale, scale_in_float=True)


class Attention(nn.Module):
    """Gemma 4 attention; a KV-shared layer has only wq/q_norm/wo and reads a source cache."""

    def __init__(self, args: ModelArgs, layer: int) -> None:
        super().__init__()
        self.head_dim = args.head_dims[layer]
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_kv_heads[layer]
        self.shared = args.kv_source[layer] != layer
        kind = args.layer_types[layer]
        self.wq = nn.Linear(args.dim, self.n_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(self.n_heads * self.head_dim, args.dim, bias=False)
        self.q_norm = _norm(self.head_dim, args.norm_eps)
        if not self.shared:
            self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
            self.wv = (
                None
                if args.k_eq_v[layer]
                else nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
            )
            self.k_norm = _norm(self.head_dim, args.norm_eps)
            self.v_norm = _norm(self.head_dim, args.norm_eps, with_scale=False)
        self.rope = RoPE(
            self.head_dim, args.rope_theta[kind], args.rope_dims[kind], args.rope_scale[kind]
        )
        spec = AttentionSpec(
            layer,
            self.n_heads,
            self.n_kv_heads,
            self.head_dim,
            scale=1.0,
            window=args.sliding_window if kind == SLIDING else None,
            kv_source=args.kv_source[layer],
        )
        self.sdpa = MatmulSDPA(spec)

    def forward(
        self, x: torch.Tensor, input_pos: torch.Tensor, cache: KVCache, mask: torch.Tensor
    ) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_norm(self.wq(x).view(b, t, self.n_heads, self.head_dim)).transpose(1, 2)
        q = self.rope(q, input_pos)
        if self.shared:
            k, v = cache.read(input_pos, t)
        else:
            k = self.wk(x).view(b, t, self.n_kv_heads, self.head_dim)
            v = k if self.wv is None else self.wv(x).view(b, t, self.n_kv_heads, self.head_dim)
            k = self.rope(self.k_norm(k).transpose(1, 2), input_pos)
            v = self.v_norm(v).transpose(1, 2)
            k, v = cache.update(input_pos, k, v)
        return self.wo(self.sdpa(q, k, v, mask, input_pos))


class FeedForward(nn.Module):
    """Gated MLP with tanh-approximated GELU."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)  # gate
        self.w3 = nn.Linear(dim, hidden, bias=False)  # up
        self.w2 = nn.Linear(hidden, dim, bias=False)  # down
        self.act = GeluTanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.act(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Sandwich-normed attention and MLP, then the per-layer-embedding gate, then layer_scalar."""

    def __init__(self, args: ModelArgs, layer: int) -> None:
        super().__init__()
        eps = args.norm_eps
        self.attention = Attention(args, layer)
        self.feed_forward = FeedForward(args.dim, args.ffn_dims[layer])
        self.attention_norm = _norm(args.dim, eps)
        self.post_attention_norm = _norm(args.dim, eps)
        self.ffn_norm = _norm(args.dim, eps)
        self.post_ffn_norm = _norm(args.dim, eps)
        self.has_ple = args.ple_dim > 0
        if self.has_ple:
            self.ple_gate = nn.Linear(args.dim, args.ple_dim, bias=False)
            self.ple_proj = nn.Linear(args.ple_dim, args.dim, bias=False)
            self.ple_norm = _norm(args.dim, eps)
            self.ple_act = GeluTanh()
        self.register_buffer("layer_scalar", torch.ones(1))

    def forward(
        self,
        x: torch.Tensor,
        ple: torch.Tensor | None,
        input_pos: torch.Tensor,
        cache: KVCache,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        h = self.attention(self.attention_norm(x), input_pos, cache, mask)
        x = x + self.post_attention_norm(h)
        x = x + self.post_ffn_norm(self.feed_forward(self.ffn_norm(x)))
        if ple is not None:
            g = self.ple_act(self.ple_gate(x)) * ple
            x = x + self.ple_norm(self.ple_proj(g))
        return x * self.layer_scalar


class Transformer(Decoder):
    """Gemma 4 text decoder with static caches: ``forward(tokens[1, T], input_pos[1]) -> [1, V]``.

    A decoder with media tokens (``ModelArgs.media_token_ids``) takes ``embeds[1, T, dim]`` (float32)
    as a third input (zeros when omitted in eager calls): at the positions holding a media token,
    the encoder's row replaces the token embedding, as transformers' ``Gemma4Model`` does (the row
    is not scaled by ``sqrt(dim)``, and the per-layer table is looked up for the pad token there);
    other rows are ignored.
    """

    # Quantized exports keep the full-attention caches in fp16 (the sliding rings keep the
    # model's dtype). On the conditioned tiny Gemma 4 (XNNPACK fp32, 240 tokens) that moved the
    # logits by at most 0.001 of their std, against 0.27 for 8da4w's own rounding
    # (docs/performance.md, "Gemma 4 E2B: file size and memory").
    half_kv_cache_when_quantized = True

    # Set in programs with an assistant drafter (``gemma4_assistant.returning_hidden``): forward
    # and verify also return the normed last hidden state of the positions they return logits of.
    returns_hidden = False

    def __init__(self, args: ModelArgs, max_context: int, max_chunk: int) -> None:
        super().__init__(args, max_context, max_chunk)
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        # Like the reference, the sqrt(dim) scale is rounded to the weights' dtype (buffer casts).
        self.register_buffer("embed_scale", torch.tensor(args.dim**0.5), persistent=False)
        if args.ple_dim:
            width = args.n_layers * args.ple_dim
            self.ple_embeddings = nn.Embedding(args.ple_vocab_size, width, dtype=args.ple_dtype)
            self.register_buffer(
                "ple_embed_scale", torch.tensor(args.ple_dim**0.5), persistent=False
            )
            self.ple_projection = nn.Linear(args.dim, width, bias=False)
            self.ple_norm = _norm(args.ple_dim, args.norm_eps)
        self.layers = nn.ModuleList(TransformerBlock(args, i) for i in range(args.n_layers))
        self.norm = _norm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        if args.tie_word_embeddings:
            self.output.weight = self.tok_embeddings.weight
        self.softcap = Softcap(args.final_softcap) if args.final_softcap is not None else None

        # One cache per layer that computes keys/values; shared layers read their source's.
        ring_size = min(max_context, args.sliding_window + max_chunk - 1)
        self.caches = nn.ModuleDict()
        for i in range(args.n_layers):
            if args.kv_source[i] == i:
                sliding = args.layer_types[i] == SLIDING
                self.caches[str(i)] = KVCache(
                    args.n_kv_heads[i],
                    ring_size if sliding else max_context,
                    args.head_dims[i],
                    window=args.sliding_window if sliding else None,
                )

    @property
    def unused_checkpoint_tensors(self) -> set[str]:
        """Checkpoint tensors this model ignores: published files still ship k/v projections and
        norms for the KV-shared layers, which never use them (the loader skips these names)."""
        names = ("wk.weight", "wv.weight", "k_norm.weight")
        return {
            f"layers.{i}.attention.{n}"
            for i in range(self.args.n_layers)
            if self.args.kv_source[i] != i
            for n in names
        }

    def cache_for(self, layer: int) -> KVCache:
        """The cache layer ``layer`` reads (its own, or its KV-sharing source's)."""
        return self.caches[str(self.args.kv_source[layer])]

    def _masks(self, positions: torch.Tensor) -> dict[str, torch.Tensor]:
        """Boolean [T, S] attention masks per layer type, from the chunk's absolute positions."""
        q_pos = positions[:, None]
        masks = {}
        # First-appearance order: a set's order follows the process's string hashing, and the
        # traced graph (the file, the export cache key) must not.
        for kind in dict.fromkeys(self.args.layer_types):
            layer = self.args.layer_types.index(kind)
            kv_pos = self.cache_for(layer).slot_positions(positions[-1:])[None, :]
            mask = (kv_pos >= 0) & (kv_pos <= q_pos)
            if kind == SLIDING:
                mask = mask & (q_pos - kv_pos < self.args.sliding_window)
            masks[kind] = mask
        return masks

    def _per_layer_inputs(self, tokens: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """PLE inputs [1, T, n_layers, ple_dim]: token table + normed projection of the embedding."""
        a = self.args
        shape = (*tokens.shape, a.n_layers, a.ple_dim)
        rows = self.ple_embeddings(tokens).to(h.dtype)
        from_tokens = (rows * self.ple_embed_scale).reshape(shape)
        projected = self.ple_norm((self.ple_projection(h) * a.dim**-0.5).reshape(shape))
        return (projected + from_tokens) * 2**-0.5

    @property
    def embeds_width(self) -> int:
        """Width of the ``embeds`` input (0: the program takes token ids only)."""
        return self.args.dim if self.args.media_token_ids else 0

    def _embed(
        self, tokens: torch.Tensor, embeds: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The residual stream's input and the per-layer inputs of a chunk."""
        if not self.args.media_token_ids:
            h = self.tok_embeddings(tokens) * self.embed_scale
            return h, self._per_layer_inputs(tokens, h) if self.args.ple_dim else None
        if embeds is None:  # eager text-only calls (references, checks)
            embeds = torch.zeros(*tokens.shape, self.args.dim)
        is_media = torch.zeros_like(tokens, dtype=torch.bool)
        for token in self.args.media_token_ids:
            is_media = is_media | (tokens == token)
        ids = torch.where(is_media, torch.zeros_like(tokens) + (self.args.pad_id or 0), tokens)
        text = self.tok_embeddings(ids) * self.embed_scale
        h = torch.where(is_media[..., None], embeds.to(text.dtype), text)
        return h, self._per_layer_inputs(ids, h) if self.args.ple_dim else None

    def forward(
        self, tokens: torch.Tensor, input_pos: torch.Tensor, embeds: torch.Tensor | None = None
    ) -> torch.Tensor:
        seq_len = tokens.shape[1]
        h, ple = self._embed(tokens, embeds)
        # Positions come from tensor ops only (no tensor + SymInt), which every backend lowers.
        positions = input_pos + torch.arange(seq_len, device=input_pos.device)
        masks = self._masks(positions)
        for i, layer in enumerate(self.layers):
            if i == self.args.first_shared_layer and not self.every_position_logits:
                # Shared layers write no cache and only the last position's logits are returned,
                # so the rest of the stack runs on the last token alone.
                h = h[:, -1:]
                ple = ple[:, -1:] if ple is not None else None
                input_pos = positions[-1:]
                masks = {kind: m[-1:] for kind, m in masks.items()}
            kind = self.args.layer_types[i]
            h = layer(
                h,
                ple[:, :, i] if ple is not None else None,
                input_pos,
                self.cache_for(i),
                masks[kind],
            )
        h = self.norm(h if self.every_position_logits else h[:, -1])
        logits = self.output(h).float()
        logits = self.softcap(logits) if self.softcap is not None else logits
        # The assistant drafter's input (gemma4_assistant): the normed state the head reads.
        return (logits, h) if self.returns_hidden else logits

    def to_dtype(self, dtype: torch.dtype) -> Transformer:
        """Cast weights and caches to ``dtype``, keeping RoPE frequencies in float32 and never
        widening the per-layer table past its checkpoint dtype (``ModelArgs.ple_dtype``)."""
        saved = {m: m.inv_freq for m in self.modules() if isinstance(m, RoPE)}
        ple = getattr(self, "ple_embeddings", None)
        widen = ple is not None and dtype.itemsize > self.args.ple_dtype.itemsize
        for child in self.children():
            if not (widen and child is ple):
                child.to(dtype)
        for name, buffer in self._buffers.items():
            if buffer is not None and buffer.is_floating_point():
                self._buffers[name] = buffer.to(dtype)
        for m, inv_freq in saved.items():
            m.inv_freq = inv_freq
        return self

    def init_random(self, seed: int = 0) -> Transformer:
        """Fill the weights with seeded random values of a trained model's rough scale."""
        init_like_trained_gemma4(self, self.layers, seed)
        return self


_HF_TOP = {
    "embed_tokens.weight": "tok_embeddings.weight",
    "embed_tokens_per_layer.weight": "ple_embeddings.weight",
    "per_layer_model_projection.weight": "ple_projection.weight",
    "per_layer_projection_norm.weight": "ple_norm.weight",
    "norm.weight": "norm.weight",
}
_HF_LAYER = {
    "self_attn.q_proj.weight": "attention.wq.weight",
    "self_attn.k_proj.weight": "attention.wk.weight",
    "self_attn.v_proj.weight": "attention.wv.weight",
    "self_attn.o_proj.weight": "attention.wo.weight",
    "self_attn.q_norm.weight": "attention.q_norm.weight",
    "self_attn.k_norm.weight": "attention.k_norm.weight",
    "mlp.gate_proj.weight": "feed_forward.w1.weight",
    "mlp.up_proj.weight": "feed_forward.w3.weight",
    "mlp.down_proj.weight": "feed_forward.w2.weight",
    "input_layernorm.weight": "attention_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffn_norm.weight",
    "per_layer_input_gate.weight": "ple_gate.weight",
    "per_layer_projection.weight": "ple_proj.weight",
    "post_per_layer_input_norm.weight": "ple_norm.weight",
    "layer_scalar": "layer_scalar",
}
# Prefixes of the text decoder in Gemma4ForCausalLM and Gemma4ForConditionalGeneration files.
_HF_PREFIXES = ("model.language_model.", "model.")
# Parts of multimodal checkpoints that are not the text decoder.
_HF_IGNORED = (
    "model.vision_tower.",
    "model.audio_tower.",
    "model.embed_vision.",
    "model.embed_audio.",
)


def hf_to_local_name(hf_name: str) -> str | None:
    """Map an HF tensor name to this module's state-dict name; None for tensors to ignore.

    The vision/audio parts of multimodal checkpoints are ignored; unknown decoder tensors are
    passed through so the loader reports them as unexpected instead of dropping them silently.
    """
    if hf_name == "lm_head.weight":
        return "output.weight"
    if hf_name.startswith(_HF_IGNORED):
        return None
    prefix = next((p for p in _HF_PREFIXES if hf_name.startswith(p)), None)
    if prefix is None:
        return hf_name
    rest = hf_name[len(prefix) :]
    if rest in _HF_TOP:
        return _HF_TOP[rest]
    if rest.startswith("layers.") and rest.count(".") >= 2:
        _, idx, tail = rest.split(".", 2)
        return f"layers.{idx}.{_HF_LAYER.get(tail, tail)}"
    return rest


def reference_model(config: dict[str, Any], seed: int | None = None) -> nn.Module:
    """transformers' ``Gemma4ForCausalLM`` for an HF config dict (parity tests only).

    With ``seed``, weights are seeded random values of a trained model's rough scale: norm weights
    around 1 (not exactly 1) and random ``layer_scalar`` s, so every parameter matters.
    """
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    fields = {k: v for k, v in config.items() if k != "model_type"}
    cfg = Gemma4TextConfig(**fields)
    cfg._attn_implementation = "eager"
    model = Gemma4ForCausalLM(cfg).eval()
    if seed is not None:
        init_like_trained_gemma4(model, model.model.layers, seed)
    return model


@torch.no_grad()
def init_like_trained_gemma4(model: nn.Module, layers: Iterable[nn.Module],
                             seed: int) -> torch.Generator:
    """Seeded random weights of a trained model's rough scale (``init_like_trained``) for a
    Gemma 4 model (ours, the assistant, transformers'), then each of ``layers``' ``layer_scalar``
    in [0.5, 1.5) rather than 1, so that it matters. Returns the generator, for what the model
    draws after."""
    g = torch.Generator().manual_seed(seed)
    init_like_trained(model, g)
    for layer in layers:
        layer.layer_scalar.copy_(0.5 + torch.rand(1, generator=g))
    return g

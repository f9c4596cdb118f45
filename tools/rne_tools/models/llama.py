"""Llama-family decoder (SmolLM2, Llama 2/3 style), written for export.

One file, math visible: RMSNorm -> GQA attention with rotate-half RoPE -> RMSNorm -> SwiGLU MLP,
composed from the shared building blocks of ``models.layers``.
Weight names follow the Hugging Face layout minus the ``model.`` prefix, so checkpoints load
without renaming or permuting.

Export-oriented choices:
- Static flat KV caches (``layers.KVCache``) are non-persistent buffers updated with
  ``index_copy_`` at tensor positions (no ``.item()``), so one graph serves prefill and decode.
- RoPE angles are looked up once per forward from precomputed tables (float64 angles).
- The causal mask is read from a precomputed ``[max_context, max_context]`` table by position.
- ``forward`` returns the logits of the last position only; with ``every_position_logits`` set
  (the ``verify`` method of a speculative-decoding export) those of every position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rne_tools.errors import CheckpointError
from rne_tools.models.layers import (
    AttentionSpec,
    Decoder,
    KVCache,
    RMSNorm,
    RotateHalf,
    TorchSDPA,
    apply_rope,
    init_like_trained,
    rope_tables,
)


@dataclass(frozen=True)
class ModelArgs:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_dim: int
    vocab_size: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 2048
    bos_id: int | None = None
    eos_ids: tuple[int, ...] = field(default_factory=tuple)

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> ModelArgs:
        """Parse a Hugging Face ``config.json`` dict of a Llama-family model."""
        model_type = cfg.get("model_type")
        if model_type not in ("llama", "mistral") and "LlamaForCausalLM" not in cfg.get(
            "architectures", []
        ):
            raise CheckpointError(
                f"config.json describes model_type={model_type!r}, not a Llama-family model; "
                "pick the architecture that matches the checkpoint."
            )
        # transformers 5 nests RoPE settings in rope_parameters; older files use rope_theta and
        # rope_scaling at the top level.
        rope = cfg.get("rope_parameters") or {}
        rope_type = rope.get(
            "rope_type", (cfg.get("rope_scaling") or {}).get("rope_type", "default")
        )
        if rope_type != "default":
            raise CheckpointError(
                f"RoPE type {rope_type!r} is not supported by the llama model (only 'default')."
            )
        if cfg.get("attention_bias") or cfg.get("mlp_bias"):
            raise CheckpointError("Llama checkpoints with attention/MLP biases are not supported.")
        try:
            dim = int(cfg["hidden_size"])
            n_heads = int(cfg["num_attention_heads"])
            eos = cfg.get("eos_token_id")
            eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (int(eos),))
            return cls(
                dim=dim,
                n_layers=int(cfg["num_hidden_layers"]),
                n_heads=n_heads,
                n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
                head_dim=int(cfg.get("head_dim") or dim // n_heads),
                hidden_dim=int(cfg["intermediate_size"]),
                vocab_size=int(cfg["vocab_size"]),
                norm_eps=float(cfg.get("rms_norm_eps", 1e-5)),
                rope_theta=float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0))),
                tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
                bos_id=cfg.get("bos_token_id"),
                eos_ids=eos_ids,
            )
        except KeyError as e:
            raise CheckpointError(f"Llama config.json lacks required key {e.args[0]!r}.") from e


# Tiny HF-style configs for tests and `--random-config`. "tiny" has GQA, tied embeddings and a
# head_dim that is not dim / n_heads, which exercises every code path.
RANDOM_CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "intermediate_size": 128,
        "vocab_size": 256,
        "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": True,
        "max_position_embeddings": 512,
        "bos_token_id": 1,
        "eos_token_id": 2,
    },
    "tiny_untied": {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "intermediate_size": 96,
        "vocab_size": 320,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
        "tie_word_embeddings": False,
        "max_position_embeddings": 512,
        "bos_token_id": 1,
        "eos_token_id": [2, 3],
    },
}


def hf_to_local_name(hf_name: str) -> str | None:
    """Map a Hugging Face tensor name to this module's parameter name (None = not a weight)."""
    if hf_name.endswith("rotary_emb.inv_freq"):
        return None
    return hf_name.removeprefix("model.")


class Attention(nn.Module):
    def __init__(self, args: ModelArgs, layer: int, max_context: int) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, args.n_kv_heads, args.head_dim
        self.q_proj = nn.Linear(args.dim, args.n_heads * args.head_dim, bias=False)
        self.k_proj = nn.Linear(args.dim, args.n_kv_heads * args.head_dim, bias=False)
        self.v_proj = nn.Linear(args.dim, args.n_kv_heads * args.head_dim, bias=False)
        self.o_proj = nn.Linear(args.n_heads * args.head_dim, args.dim, bias=False)
        self.rotate_half = RotateHalf(args.head_dim)
        self.cache = KVCache(args.n_kv_heads, max_context, args.head_dim, window=None)
        spec = AttentionSpec(
            layer, args.n_heads, args.n_kv_heads, args.head_dim, scale=None, window=None,
            kv_source=layer,
        )
        self.sdpa = TorchSDPA(spec)

    def forward(self, x: Tensor, input_pos: Tensor, cos: Tensor, sin: Tensor, mask: Tensor) -> Tensor:
        # Reshapes spell the dynamic T as -1 so delegates see static shapes elsewhere.
        q = self.q_proj(x).view(1, -1, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(1, -1, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(1, -1, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, cos, sin, self.rotate_half)
        k = apply_rope(k, cos, sin, self.rotate_half)
        # Attend over the whole cache; the mask hides unwritten and future slots.
        k, v = self.cache.update(input_pos, k, v)
        return self.o_proj(self.sdpa(q, k, v, mask, input_pos))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden_dim, bias=False)
        self.up_proj = nn.Linear(dim, hidden_dim, bias=False)
        self.down_proj = nn.Linear(hidden_dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, layer: int, max_context: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(args.dim, args.norm_eps)
        self.self_attn = Attention(args, layer, max_context)
        self.post_attention_layernorm = RMSNorm(args.dim, args.norm_eps)
        self.mlp = MLP(args.dim, args.hidden_dim)

    def forward(self, x: Tensor, input_pos: Tensor, cos: Tensor, sin: Tensor, mask: Tensor) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), input_pos, cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Transformer(Decoder):
    # Quantized variants may keep the KV cache in fp16 (half the bytes a long-context decode step
    # reads): measured on SmolLM2 to keep its agreement with fp32.
    half_kv_cache_when_quantized = True

    def __init__(self, args: ModelArgs, max_context: int, max_chunk: int) -> None:
        super().__init__(args, max_context, max_chunk)
        self.embed_tokens = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(
            DecoderLayer(args, i, max_context) for i in range(args.n_layers)
        )
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.lm_head = nn.Linear(args.dim, args.vocab_size, bias=False)
        if args.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        cos, sin = rope_tables(args.head_dim, max_context, args.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        causal = torch.ones(max_context, max_context, dtype=torch.bool).tril()
        self.register_buffer("causal_mask", causal, persistent=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        """tokens: int64 [1, T]; input_pos: int64 [1] (absolute position of tokens[0, 0]).

        Returns float32 logits ``[1, vocab]`` of the last position (``[1, T, vocab]`` of every
        position with ``every_position_logits``).
        """
        positions = input_pos + torch.arange(tokens.shape[1], dtype=torch.long)
        cos, sin = self.rope_cos[positions], self.rope_sin[positions]
        mask = self.causal_mask[positions]  # [T, max_context]
        h = self.embed_tokens(tokens)
        for layer in self.layers:
            # Layers get the graph input itself: a backend that reads the start position as a
            # scalar (Vulkan) can only read it from a graph input.
            h = layer(h, input_pos, cos, sin, mask)
        h = self.norm(h if self.every_position_logits else h[:, -1, :])
        return self.lm_head(h).float()

    def cache_for(self, layer: int) -> KVCache:
        """The cache layer ``layer`` attends over (every Llama layer writes its own)."""
        return self.layers[layer].self_attn.cache

    def to_dtype(self, dtype: torch.dtype) -> Transformer:
        """Cast weights, caches and RoPE tables to ``dtype``."""
        return self.to(dtype)

    @torch.no_grad()
    def init_random(self, seed: int = 0) -> Transformer:
        """Fill the weights with seeded random values of a trained model's rough scale."""
        init_like_trained(self, torch.Generator().manual_seed(seed))
        return self


def reference_model(cfg: dict[str, Any]) -> nn.Module:
    """Build the Hugging Face ``LlamaForCausalLM`` for ``cfg`` (parity tests only)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**cfg)).eval()

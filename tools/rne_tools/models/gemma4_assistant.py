"""Gemma 4's assistant: the small drafter Google publishes beside each Gemma 4 size, for
speculative decoding ("multi-token prediction" in LiteRT-LM), written for export.

Facts, as in transformers' ``Gemma4AssistantForCausalLM`` and the candidate generator that runs
it (``SinglePositionMultiTokenCandidateGenerator``):

- it keeps no cache of its own. Each of its layers is a Gemma 4 KV-shared layer: queries only,
  attending over the keys/values the *target* stored, in the target's last non-shared layer of
  the same type (sliding or full);
- it drafts from one position. With the target's next token ``t`` at position ``p`` (not yet in
  the target's cache), its input is ``[embed(t), h]``: the target's scaled token embedding of
  ``t`` and the target's last hidden state (after the final norm) at ``p - 1``, concatenated and
  projected to the assistant's width. Its queries sit at position ``p`` and see the target's
  positions ``< p`` (full layers: all of them; sliding layers: the last ``sliding_window``);
- its final hidden state, projected back to the target's width, replaces ``h`` for the next draft
  (whose ``t`` is the token just drafted); the position stays ``p`` for the whole round;
- its head is tied to its own token table. Published assistants use an ordered head: a linear
  picks the ``top_k`` best of ``num_centroids`` clusters of ``vocab / num_centroids`` tokens
  each (``token_ordering`` lists the tokens cluster by cluster), and only those tokens get a
  logit; every other token is below all of them.

Drafts are greedy (the argmax): the runner keeps a drafted token only where the target's own
sample equals it, so any deterministic drafter leaves the target's distribution exact.

``Assistant.forward(embedding, hidden, input_pos, target)`` reads the caches of ``target`` (a
``gemma4.Transformer``) in place; ``propose`` is the same returning only the chosen token, which
is what the exported ``draft`` method computes (docs/design.md, "Speculative decoding").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rne_tools.errors import CheckpointError
from rne_tools.models import gemma4
from rne_tools.models.layers import KVCache

SLIDING, FULL = gemma4.SLIDING, gemma4.FULL


@dataclass(frozen=True)
class AssistantArgs:
    """Shape of one assistant (its ``text_config``) and the target facts it was trained for."""

    dim: int
    backbone_dim: int  # the target's hidden size
    vocab_size: int
    n_heads: int
    layer_types: tuple[str, ...]
    head_dims: tuple[int, ...]
    n_kv_heads: tuple[int, ...]
    ffn_dim: int
    sliding_window: int
    rope_theta: dict[str, float]
    rope_dims: dict[str, int]
    rope_scale: dict[str, float]
    norm_eps: float
    num_centroids: int  # 0: a plain head over the whole vocabulary
    centroid_top_k: int

    @property
    def n_layers(self) -> int:
        return len(self.layer_types)

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> AssistantArgs:
        """Parse a ``gemma4_assistant`` ``config.json`` dict; CheckpointError on anything this
        drafter does not implement."""
        if cfg.get("model_type") != "gemma4_assistant":
            raise CheckpointError(
                f"config.json has model_type {cfg.get('model_type')!r}; a Gemma 4 assistant "
                "checkpoint has 'gemma4_assistant' (e.g. google/gemma-4-e2b-it-assistant)."
            )
        text = dict(cfg.get("text_config") or {})
        n = int(text.get("num_hidden_layers", 0))
        if n < 1:
            raise CheckpointError("The assistant's text_config has no layers.")
        for key, allowed in (("hidden_size_per_layer_input", (0, None)),
                             ("enable_moe_block", (False, None)),
                             ("use_double_wide_mlp", (False, None)),
                             ("attention_bias", (False, None))):
            if text.get(key) not in allowed:
                raise CheckpointError(
                    f"The assistant's text_config sets {key}={text.get(key)!r}, which a Gemma 4 "
                    "assistant does not use and this drafter does not implement."
                )
        if text.get("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
            raise CheckpointError("The assistant's hidden_activation must be gelu_pytorch_tanh.")
        from transformers import Gemma4TextConfig

        # Every layer of an assistant reads the target's caches (num_kv_shared_layers = all).
        fields = {k: v for k, v in text.items() if k not in ("model_type", "transformers_version")}
        fields["num_kv_shared_layers"] = 0  # per-layer shapes only; sharing is implied
        try:
            c = Gemma4TextConfig(**fields)
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"The assistant's text_config is not valid: {e}") from e
        types = tuple(c.layer_types)
        rope_theta, rope_dims, rope_scale = {}, {}, {}
        for t in sorted(set(types)):
            params = c.rope_parameters[t]
            head_dim = c.per_layer_config[t].head_dim
            proportional = params.get("rope_type", "default") == "proportional"
            rope_theta[t] = float(params["rope_theta"])
            partial = float(params.get("partial_rotary_factor", 1.0))
            rope_dims[t] = 2 * int(partial * head_dim // 2)
            rope_scale[t] = 1.0 / float(params.get("factor", 1.0)) if proportional else 1.0
        ordered = bool(cfg.get("use_ordered_embeddings", False))
        centroids = int(cfg.get("num_centroids", 2048)) if ordered else 0
        if centroids and c.vocab_size % centroids:
            raise CheckpointError(
                f"vocab_size {c.vocab_size} is not a multiple of num_centroids {centroids}."
            )
        return cls(
            dim=c.hidden_size,
            backbone_dim=int(cfg.get("backbone_hidden_size", 1536)),
            vocab_size=c.vocab_size,
            n_heads=c.num_attention_heads,
            layer_types=types,
            head_dims=tuple(c.per_layer_config[i].head_dim for i in range(n)),
            n_kv_heads=tuple(c.per_layer_config[i].num_key_value_heads for i in range(n)),
            ffn_dim=c.intermediate_size,
            sliding_window=c.sliding_window,
            rope_theta=rope_theta,
            rope_dims=rope_dims,
            rope_scale=rope_scale,
            norm_eps=c.rms_norm_eps,
            num_centroids=centroids,
            centroid_top_k=int(cfg.get("centroid_intermediate_top_k", 32)) if ordered else 0,
        )

    def layer_args(self) -> gemma4.ModelArgs:
        """The layers as Gemma 4 decoder layers that all share another layer's cache (their
        ``kv_source`` is -1: no layer of the assistant computes keys or values)."""
        n = self.n_layers
        return gemma4.ModelArgs(
            vocab_size=self.vocab_size, dim=self.dim, n_layers=n, n_heads=self.n_heads,
            layer_types=self.layer_types, head_dims=self.head_dims, n_kv_heads=self.n_kv_heads,
            ffn_dims=(self.ffn_dim,) * n, kv_source=(-1,) * n, k_eq_v=(False,) * n,
            sliding_window=self.sliding_window, rope_theta=self.rope_theta,
            rope_dims=self.rope_dims, rope_scale=self.rope_scale, norm_eps=self.norm_eps,
            final_softcap=None, ple_dim=0, ple_vocab_size=0, ple_dtype=torch.float32,
            tie_word_embeddings=True, bos_id=None, eos_ids=(), pad_id=None,
        )

    def target_problem(self, target: gemma4.ModelArgs) -> str | None:
        """Why this assistant cannot draft for ``target`` (None: it can): its input and the
        caches it reads must have the target's shapes."""
        if self.backbone_dim != target.dim:
            return (f"the assistant was trained for a target of hidden size {self.backbone_dim}, "
                    f"this model has {target.dim}")
        if self.vocab_size != target.vocab_size:
            return (f"the assistant's vocabulary has {self.vocab_size} tokens, the model's "
                    f"{target.vocab_size}")
        for i, kind in enumerate(self.layer_types):
            source = store_layers(target).get(kind)
            if source is None:
                return f"the model has no {kind} layer whose cache assistant layer {i} reads"
            shape = (target.n_kv_heads[source], target.head_dims[source])
            if (self.n_kv_heads[i], self.head_dims[i]) != shape:
                return (f"assistant layer {i} ({kind}) expects {self.n_kv_heads[i]} kv heads of "
                        f"{self.head_dims[i]}, the model's layer {source} stores {shape[0]} of "
                        f"{shape[1]}")
        if SLIDING in self.layer_types and self.sliding_window != target.sliding_window:
            return (f"sliding window {self.sliding_window} differs from the model's "
                    f"{target.sliding_window}")
        return None


@contextlib.contextmanager
def returning_hidden(target: nn.Module) -> Iterator[nn.Module]:
    """``target`` (a ``gemma4.Transformer``) returning ``(logits, hidden)``: also the normed last
    hidden state of the positions it returns logits of, which the assistant drafts from."""
    target.returns_hidden = True
    try:
        yield target
    finally:
        del target.returns_hidden  # back to the class's False


def store_layers(target: gemma4.ModelArgs) -> dict[str, int]:
    """Per layer type, the target's last layer that computes its own keys/values: the cache an
    assistant layer of that type reads."""
    out: dict[str, int] = {}
    for i in range(target.n_layers):
        if target.kv_source[i] == i:
            out[target.layer_types[i]] = i
    return out


def config_digest(cfg: dict[str, Any]) -> str:
    """A short hash of a config dict, keys sorted: what an export records of the target an
    assistant drafts for, and of the assistant itself."""
    text = json.dumps(cfg, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Assistant(nn.Module):
    """The drafter: pre-projection, Gemma 4 KV-shared layers over the target's caches, final
    norm, post-projection and the (ordered) head."""

    def __init__(self, args: AssistantArgs) -> None:
        super().__init__()
        self.args = args
        layer_args = args.layer_args()
        self.pre_projection = nn.Linear(2 * args.backbone_dim, args.dim, bias=False)
        self.layers = nn.ModuleList(
            gemma4.TransformerBlock(layer_args, i) for i in range(args.n_layers)
        )
        self.norm = gemma4._norm(args.dim, args.norm_eps)
        self.post_projection = nn.Linear(args.dim, args.backbone_dim, bias=False)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)  # tied: its token table
        if args.num_centroids:
            self.centroids = nn.Linear(args.dim, args.num_centroids, bias=False)
            self.register_buffer(
                "token_ordering", torch.arange(args.vocab_size), persistent=True
            )

    def _hidden(
        self, embedding: Tensor, hidden: Tensor, input_pos: Tensor, target: nn.Module
    ) -> Tensor:
        """The normed final state [1, 1, dim] of one draft step at position ``input_pos``."""
        x = self.pre_projection(torch.cat([embedding, hidden], dim=-1))
        readers = {kind: TargetCacheReader(target.caches[str(layer)], input_pos, kind, self.args)
                   for kind, layer in store_layers(target.args).items()}
        for i, layer in enumerate(self.layers):
            kind = self.args.layer_types[i]
            reader = readers[kind]
            x = layer(x, None, input_pos, reader, reader.mask)
        return self.norm(x)

    def _candidates(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """Token ids [N] that get a logit and their logits [N] (the whole vocabulary, or the
        tokens of the ``top_k`` best clusters)."""
        if not self.args.num_centroids:
            return torch.arange(self.args.vocab_size), self.output(h).reshape(-1)
        per_cluster = self.args.vocab_size // self.args.num_centroids
        best = torch.topk(self.centroids(h).reshape(-1), self.args.centroid_top_k).indices
        ids = self.token_ordering.view(self.args.num_centroids, per_cluster)[best].reshape(-1)
        rows = self.output.weight.index_select(0, ids)
        return ids, (rows @ h.reshape(-1, 1)).reshape(-1)

    def forward(
        self, embedding: Tensor, hidden: Tensor, input_pos: Tensor, target: nn.Module
    ) -> tuple[Tensor, Tensor]:
        """(logits [vocab], next hidden [1, 1, backbone_dim]) of one draft step. Tokens outside
        the chosen clusters get one less than the smallest chosen logit, as transformers does."""
        h = self._hidden(embedding, hidden, input_pos, target)
        ids, scores = self._candidates(h)
        logits = torch.full((self.args.vocab_size,), 0.0, dtype=scores.dtype)
        if self.args.num_centroids:
            logits = logits + scores.min() - 1.0
        logits = logits.scatter(0, ids, scores)
        return logits, self.post_projection(h)

    def propose(
        self, embedding: Tensor, hidden: Tensor, input_pos: Tensor, target: nn.Module
    ) -> tuple[Tensor, Tensor]:
        """(drafted token [1] int64, next hidden [1, 1, backbone_dim]): the argmax of
        ``forward``'s logits without writing them out."""
        h = self._hidden(embedding, hidden, input_pos, target)
        ids, scores = self._candidates(h)
        return ids[torch.argmax(scores).reshape(1)], self.post_projection(h)

    @torch.no_grad()
    def init_random(self, seed: int = 0) -> Assistant:
        """Seeded random weights of a trained model's rough scale, a random token ordering."""
        g = gemma4.init_like_trained_gemma4(self, self.layers, seed)
        if self.args.num_centroids:
            self.token_ordering.copy_(torch.randperm(self.args.vocab_size, generator=g))
        return self


class TargetCacheReader:
    """What an assistant layer of ``kind`` attends over, read from the target's cache in place:
    the positions ``< p`` a query at ``p = input_pos`` may see (full layers: ``[0, p)``; sliding
    layers: the last ``sliding_window`` of them). Stands in for the cache a Gemma 4 KV-shared
    layer ``read()``s; ``mask`` is the matching [1, S] mask.

    Ring caches hold more slots than the window (and the target's rejected drafts beyond ``p``);
    the window's slots are gathered in position order, so only they are read. A flat cache
    written in place (``InPlaceKVCache``, [1, S, H, D]) is read through the custom SDPA op, which
    bounds the slots by position itself (``_CustomOpSharedSDPA``).
    """

    def __init__(self, cache: nn.Module, input_pos: Tensor, kind: str, args: AssistantArgs):
        self.cache = cache
        if kind == SLIDING:
            span = min(args.sliding_window + 1, cache.size)
            positions = input_pos - span + torch.arange(span)
            # Positions before 0 (a short context) are masked; clamped, they read slot 0
            # instead of asking the runtime's remainder for a negative dividend's.
            slots = torch.remainder(positions.clamp(min=0), cache.size)
            self._kv = (cache.k.index_select(2, slots), cache.v.index_select(2, slots))
            self.mask = (positions >= 0)[None, :]
        elif _in_place(cache):
            self._kv = (cache.k, cache.v)
            self.mask = torch.ones(1, 1, dtype=torch.bool)  # unused by the custom op
        else:
            self._kv = (cache.k, cache.v)
            self.mask = (torch.arange(cache.size) < input_pos)[None, :]

    def read(self, input_pos: Tensor, seq_len: int) -> tuple[Tensor, Tensor]:
        return self._kv


def _in_place(cache: nn.Module) -> bool:
    """A flat cache kept [1, S, H, D] and written by ``llama::update_cache`` (XNNPACK's)."""
    return isinstance(cache, KVCache) and hasattr(cache, "remember_write")


class _CustomOpSharedSDPA(nn.Module):
    """A full-attention assistant layer over an in-place cache: ``llama::custom_sdpa`` with
    the query at ``p`` placed at ``p - 1`` causally, so it sees slots ``[0, p)``."""

    def __init__(self, spec: Any) -> None:
        super().__init__()
        self.spec = spec

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        from rne_tools.export.custom_ops import chunk_start

        # start + 1 <= size: the query's own position p = start + 1 is within the cache.
        start = chunk_start(input_pos, 1, k.shape[1])
        torch._check(start >= 1)
        out = torch.ops.llama.custom_sdpa(
            q.transpose(1, 2).to(k.dtype), k, v, start - 1, None, 0.0, True, self.spec.scale
        )
        return out.to(q.dtype).reshape(1, -1, self.spec.n_heads * self.spec.head_dim)


def use_in_place_full_caches(assistant: Assistant, target: nn.Module) -> None:
    """Point the assistant's full-attention layers at the custom SDPA op where the target's
    full caches are written in place (after XNNPACK's transforms)."""
    full = store_layers(target.args).get(FULL)
    if full is None or not _in_place(target.caches[str(full)]):
        return
    for i, layer in enumerate(assistant.layers):
        if assistant.args.layer_types[i] == FULL:
            layer.attention.sdpa = _CustomOpSharedSDPA(layer.attention.sdpa.spec)


_HF_TOP = {
    "pre_projection.weight": "pre_projection.weight",
    "post_projection.weight": "post_projection.weight",
    "lm_head.weight": "output.weight",
    "model.embed_tokens.weight": "output.weight",
    "model.norm.weight": "norm.weight",
    "masked_embedding.centroids.weight": "centroids.weight",
    "masked_embedding.token_ordering": "token_ordering",
}


def hf_to_local_name(hf_name: str) -> str | None:
    """Map a ``Gemma4AssistantForCausalLM`` tensor name to ``Assistant``'s (None: ignored)."""
    if hf_name in _HF_TOP:
        return _HF_TOP[hf_name]
    if hf_name.startswith("model.layers."):
        _, _, idx, tail = hf_name.split(".", 3)
        if tail in ("self_attn.k_proj.weight", "self_attn.v_proj.weight",
                    "self_attn.k_norm.weight"):
            return None  # shared layers never use their own keys/values
        return f"layers.{idx}.{gemma4._HF_LAYER.get(tail, tail)}"
    return hf_name


def load_assistant(directory: Path | str) -> tuple[Assistant, dict[str, Any]]:
    """An ``Assistant`` from a transformers checkpoint directory (``config.json`` and
    ``*.safetensors``) and its config dict. CheckpointError on a missing, foreign or
    incomplete checkpoint."""
    from safetensors.torch import load_file

    directory = Path(directory)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{directory} has no config.json: not a checkpoint directory.")
    cfg = json.loads(config_path.read_text())
    args = AssistantArgs.from_hf_config(cfg)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{directory} has no *.safetensors weights.")
    model = Assistant(args)
    state: dict[str, Tensor] = {}
    for f in files:
        for name, tensor in load_file(f).items():
            local = hf_to_local_name(name)
            if local is not None:
                state[local] = tensor.float() if tensor.is_floating_point() else tensor
    if "token_ordering" in state:
        state["token_ordering"] = state["token_ordering"].long()
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise CheckpointError(
            f"{directory} does not fit a Gemma 4 assistant of its config: missing "
            f"{sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}."
        )
    return model.eval(), cfg


# A tiny assistant for the tiny targets of ``gemma4.RANDOM_CONFIGS`` ("tiny": kv heads 2, head
# dims 16/32, window 6, width 64, vocabulary 256), with an ordered head of 16 clusters.
def tiny_config(target: dict[str, Any]) -> dict[str, Any]:
    """An ``gemma4_assistant`` config dict of two layers (one per type) for ``target``."""
    text = {
        "model_type": "gemma4_text",
        "vocab_size": target["vocab_size"],
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_hidden_layers": 2,
        "layer_types": [SLIDING, FULL],
        "num_kv_shared_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": target["num_key_value_heads"],
        "head_dim": target["head_dim"],
        "global_head_dim": target["global_head_dim"],
        "sliding_window": target["sliding_window"],
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": 0,
        "rope_parameters": target["rope_parameters"],
        "final_logit_softcapping": None,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    }
    if target.get("attention_k_eq_v"):
        text["attention_k_eq_v"] = True
    return {
        "model_type": "gemma4_assistant",
        "text_config": text,
        "backbone_hidden_size": target["hidden_size"],
        "use_ordered_embeddings": True,
        "num_centroids": 16,
        "centroid_intermediate_top_k": 4,
        "tie_word_embeddings": True,
    }



# The shape of google/gemma-4-E2B-it-assistant (its config.json; docs/design.md): about 77 M
# parameters, 67 M of them its token table. ``write_random_checkpoint(dir, "e2b")`` gives it
# random weights, for programs and benchmarks at E2B's widths.
E2B_CONFIG: dict[str, Any] = {
    "model_type": "gemma4_assistant",
    "text_config": {
        "model_type": "gemma4_text",
        "vocab_size": 262144,
        "hidden_size": 256,
        "intermediate_size": 2048,
        "num_hidden_layers": 4,
        "layer_types": [SLIDING, SLIDING, SLIDING, FULL],
        "num_kv_shared_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "global_head_dim": 512,
        "sliding_window": 512,
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": 0,
        "rope_parameters": {
            FULL: {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                   "rope_type": "proportional"},
            SLIDING: {"rope_theta": 10000.0, "rope_type": "default"},
        },
        "final_logit_softcapping": None,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "backbone_hidden_size": 1536,
    "use_ordered_embeddings": True,
    "num_centroids": 2048,
    "centroid_intermediate_top_k": 32,
    "tie_word_embeddings": True,
}


def write_random_checkpoint(directory: Path | str, target: str = "tiny", seed: int = 0) -> Path:
    """A transformers-layout assistant checkpoint (config.json, model.safetensors) of seeded
    random weights for ``gemma4.RANDOM_CONFIGS[target]``, or of E2B's published assistant shape
    for ``target="e2b"``: the test fixture of exports with a draft method, and the drafter of
    E2B-width benchmarks. ``load_assistant`` reads it back; transformers loads it too."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cfg = E2B_CONFIG if target == "e2b" else tiny_config(gemma4.RANDOM_CONFIGS[target])
    model = Assistant(AssistantArgs.from_hf_config(cfg)).init_random(seed)
    local_to_hf = {v: k for k, v in _HF_TOP.items() if k != "lm_head.weight"}
    reverse_layer = {v: k for k, v in gemma4._HF_LAYER.items()}
    state = {}
    for name, tensor in model.state_dict().items():
        if name.startswith("layers."):
            _, idx, tail = name.split(".", 2)
            hf = f"model.layers.{idx}.{reverse_layer[tail]}"
        else:
            hf = local_to_hf[name]
        state[hf] = tensor.contiguous()
    save_file(state, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return directory


if __name__ == "__main__":
    import sys

    # python -m rne_tools.models.gemma4_assistant DIR [TARGET]: a random checkpoint (tests;
    # TARGET e2b: the shape of E2B's published assistant, for benchmarks).
    write_random_checkpoint(sys.argv[1], *(sys.argv[2:3] or ["tiny"]))

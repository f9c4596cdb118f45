"""The random multimodal Gemma 4 both encoders are checked against, and what their exported
copies share.

``reference_model`` is transformers' ``Gemma4ForConditionalGeneration`` with a vision and an audio
tower beside the project's tiny text model, its weights seeded random values of a trained
model's rough scale. The audio tower draws from a generator of its own (after everything else),
so the text and vision weights are the ones the model had before it had an audio tower.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from rne_tools.errors import ExportError
from rne_tools.models.gemma4 import RANDOM_CONFIGS as TEXT_RANDOM_CONFIGS
from rne_tools.models.layers import init_like_trained
from rne_tools.paths import cache_root


def _tiny_vision(**overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "patch_size": 16,
        "pooling_kernel_size": 3,
        # Patch coordinates reach max_soft_tokens * 3 on a thin picture (the processor caps the
        # long side at max_soft_tokens * 48 pixels): 1024 covers budgets up to 280.
        "position_embedding_size": 1024,
        # E2B's options that add arithmetic are on, so the tiny model exercises them.
        "standardize": True,
        "use_clipped_linears": True,
        "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0},
        "rms_norm_eps": 1e-6,
    }
    cfg.update(overrides)
    return cfg


def _tiny_audio(**overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        # The subsampling's first width must stay 128: transformers sizes the projection after
        # it as (channels[0] // 4) * channels[1], which is (128 mel bins / 4) * channels[1].
        "subsampling_conv_channels": [128, 8],
        "output_proj_dims": 48,
        # E2B's attention geometry (chunks of 12, 12 frames of left context, none right) and
        # clipped linears, so the tiny tower runs every operation of E2B's.
        "conv_kernel_size": 5,
        "attention_chunk_size": 12,
        "attention_context_left": 13,
        "attention_context_right": 0,
        "attention_logit_cap": 50.0,
        "use_clipped_linears": True,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
    }
    cfg.update(overrides)
    return cfg


@dataclass(frozen=True)
class MultimodalConfig:
    """A random multimodal Gemma 4: the text part is a project text config, the towers small."""

    text: str  # a key of rne_tools.models.gemma4.RANDOM_CONFIGS
    vision: dict[str, Any]
    audio: dict[str, Any]
    # Changes to that text config (e.g. Gemma 4's vocabulary size).
    text_overrides: dict[str, Any] = field(default_factory=dict)

    def text_config(self) -> dict[str, Any]:
        return {**TEXT_RANDOM_CONFIGS[self.text], **self.text_overrides}

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text_config(), "vision": self.vision, "audio": self.audio}


RANDOM_CONFIGS: dict[str, MultimodalConfig] = {
    # The project's tiny text model (hidden 64) with a 2-layer, 32-wide vision tower and a
    # 2-layer, 32-wide audio conformer.
    "tiny": MultimodalConfig(text="tiny", vision=_tiny_vision(), audio=_tiny_audio()),
    # The same with Gemma 4's 262,144-id vocabulary, so Gemma 4's tokenizer and chat template
    # (and its image and audio token ids) drive it end to end.
    "tiny_gemma4_vocab": MultimodalConfig(
        text="tiny", vision=_tiny_vision(), audio=_tiny_audio(),
        text_overrides={"vocab_size": 262144, "vocab_size_per_layer_input": 262144},
    ),
    # Gemma 4 E2B's towers at their real widths and depths (random weights), projected into
    # E2B's text width (1536); the text decoder stays the tiny one, since only its width reaches
    # the encoders. Vision: transformers' Gemma4VisionConfig defaults (768 wide, 16 layers of 12
    # heads x 64, MLP 3072, position table 10240) with E2B's clipped linears and no
    # standardisation. Audio: E2B's config.json (the USM conformer: 12 layers, 1024 wide, 8
    # heads, subsampling channels [128, 32], output_proj_dims 1536, clipped linears), which
    # is also Gemma4AudioConfig's defaults.
    "e2b": MultimodalConfig(
        text="tiny",
        vision=_tiny_vision(
            hidden_size=768, intermediate_size=3072, num_hidden_layers=16,
            num_attention_heads=12, num_key_value_heads=12, head_dim=64,
            position_embedding_size=10240, standardize=False,
        ),
        audio=_tiny_audio(
            hidden_size=1024, num_hidden_layers=12, num_attention_heads=8,
            subsampling_conv_channels=[128, 32], output_proj_dims=1536,
        ),
        text_overrides={"hidden_size": 1536},
    ),
}
# E2B's widths at 2 of their layers (vision 2 of 16, audio 2 of 12): what a shared 2-core machine
# exports and verifies in minutes. The full random towers amplify even fp32 rounding: their fp32
# vision program was 0.032 of the std off eager, over the fp32 bound (docs/multimodal.md).
RANDOM_CONFIGS["e2b_2l"] = MultimodalConfig(
    text="tiny",
    vision={**RANDOM_CONFIGS["e2b"].vision, "num_hidden_layers": 2},
    audio={**RANDOM_CONFIGS["e2b"].audio, "num_hidden_layers": 2},
    text_overrides={"hidden_size": 1536},
)


def random_config(name: str) -> MultimodalConfig:
    if name not in RANDOM_CONFIGS:
        raise ExportError(
            f"Unknown multimodal random config {name!r}; "
            f"known: {', '.join(sorted(RANDOM_CONFIGS))}."
        )
    return RANDOM_CONFIGS[name]


def _clip_bounds(module: nn.Module, g: torch.Generator) -> None:
    """Finite clipping bounds near 2.5 (activations are about unit scale after the norms), so
    the clipped linears clip about 1% of values instead of nothing."""
    for name, buffer in module.named_buffers():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("input_min", "output_min"):
            buffer.fill_(-2.0 - float(torch.rand((), generator=g)))
        elif leaf in ("input_max", "output_max"):
            buffer.fill_(2.0 + float(torch.rand((), generator=g)))


def reference_model(name: str, seed: int = 0) -> nn.Module:
    """transformers' ``Gemma4ForConditionalGeneration`` for a named config, its weights seeded
    random values of a trained model's rough scale (every parameter matters: norm weights around
    1, finite clipping bounds that clip a few values, a real standardisation)."""
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration

    config = random_config(name)
    text = {k: v for k, v in config.text_config().items() if k != "model_type"}
    hf_config = Gemma4Config(text_config=text, vision_config=dict(config.vision),
                             audio_config=dict(config.audio))
    # The eager attention is the reference arithmetic (and the one torch.export traces).
    for cfg in (hf_config, hf_config.text_config, hf_config.vision_config,
                hf_config.audio_config):
        cfg._attn_implementation = "eager"
    model = Gemma4ForConditionalGeneration(hf_config).eval()
    audio = (model.model.audio_tower, model.model.embed_audio)
    audio_ids = {id(p) for m in audio for p in m.parameters()}
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        # Text and vision first, in the order they had before the audio tower existed.
        init_like_trained([p for p in model.parameters() if id(p) not in audio_ids], g)
        for layer in model.model.language_model.layers:
            layer.layer_scalar.copy_(0.5 + torch.rand(1, generator=g))
        tower = model.model.vision_tower
        _clip_bounds(tower, g)
        if tower.config.standardize:
            tower.std_bias.copy_(0.5 * torch.randn(tower.std_bias.shape, generator=g))
            tower.std_scale.copy_(0.5 + torch.rand(tower.std_scale.shape, generator=g))
        g_audio = torch.Generator().manual_seed(seed + 1_000_003)
        init_like_trained([p for m in audio for p in m.parameters()], g_audio)
        _clip_bounds(model.model.audio_tower, g_audio)
    return model


class ScalarClampLinear(nn.Module):
    """``Gemma4ClippableLinear`` with its clipping bounds read once as Python floats: XNNPACK
    takes a clamp with scalar bounds, not one whose bounds are tensors (which ended a delegate
    at every linear). Infinite bounds (the default) clip nothing and are left out."""

    def __init__(self, clippable: nn.Module) -> None:
        super().__init__()
        self.linear = clippable.linear
        bounds = ("input_min", "input_max", "output_min", "output_max")
        clipped = clippable.use_clipped_linears
        self.input_min, self.input_max, self.output_min, self.output_max = (
            _finite(getattr(clippable, b)) if clipped else None for b in bounds
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_min is not None or self.input_max is not None:
            x = torch.clamp(x, self.input_min, self.input_max)
        x = self.linear(x)
        if self.output_min is not None or self.output_max is not None:
            x = torch.clamp(x, self.output_min, self.output_max)
        return x


def _finite(bound: torch.Tensor) -> float | None:
    value = float(bound)
    return value if math.isfinite(value) else None


def replace_clamps_and_norms(module: nn.Module) -> None:
    """In place: every ``Gemma4ClippableLinear`` as a ``ScalarClampLinear`` and every
    ``Gemma4RMSNorm`` as ``xnnpack_ops.FourDimRMSNorm`` (XNNPACK's mean takes only the two
    innermost dims of a 4-D tensor; ``rsqrt`` for ``pow(-0.5)``), the same functions."""
    from transformers.models.gemma4.modeling_gemma4 import Gemma4ClippableLinear, Gemma4RMSNorm

    from rne_tools.export.backends.xnnpack_ops import FourDimRMSNorm

    for name, child in module.named_children():
        if isinstance(child, Gemma4ClippableLinear):
            setattr(module, name, ScalarClampLinear(child))
        elif isinstance(child, Gemma4RMSNorm):
            # transformers scales in float32 before the cast back, as scale_in_float does.
            norm = SimpleNamespace(eps=child.eps, weight=getattr(child, "weight", None),
                                   scale_in_float=True)
            setattr(module, name, FourDimRMSNorm(norm))
        else:
            replace_clamps_and_norms(child)


def cached_checkpoint(name: str, seed: int = 0) -> Path:
    """``reference_model(name, seed)`` saved by transformers (``save_pretrained``), as a
    downloaded checkpoint is: what the decoder export reads for a multimodal test model. Written
    once per config, seed and transformers version under the cache (the decoder export's own
    cache is keyed on the files)."""
    import transformers

    recipe = json.dumps([random_config(name).as_dict(), seed, transformers.__version__],
                        sort_keys=True)
    key = hashlib.sha256(recipe.encode()).hexdigest()[:16]
    path = cache_root() / "checkpoints" / f"gemma4_{name}-{key}"
    if not (path / "config.json").is_file():
        staging = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        reference_model(name, seed).save_pretrained(staging)
        shutil.rmtree(path, ignore_errors=True)
        staging.rename(path)
    return path

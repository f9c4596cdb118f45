"""Gemma 4's vision encoder as one exportable module, and transformers' own path as its reference.

What transformers 5.23 does to an image (``Gemma4Model.get_image_features``):
``vision_tower`` (``Gemma4VisionModel``: patch embedding with 2-D position tables, a bidirectional
encoder with axial RoPE over the real patches, 3x3 average pooling by patch position, the
``sqrt(hidden)`` scale, optional standardisation) then ``embed_vision``
(``Gemma4MultimodalEmbedder``: an unscaled RMSNorm and a linear projection into the text
embedding space). transformers drops the
pooled rows no patch fell into with a boolean index (``hidden_states[pooler_mask]``), a
data-dependent shape that cannot be exported.

``VisionEncoder`` calls the same transformers submodules in the same order, so the arithmetic is
theirs, and keeps the fixed shape instead: every pooled row goes through standardisation and the
projection (both act row by row, so the real rows are computed exactly as transformers computes
them) and the rows past the image's soft tokens are set to zero. Real patches cover the pooling
cells ``0 .. num_soft_tokens - 1`` (row-major over the pooled grid), so the real rows are always
the first ``num_soft_tokens``: the rows the runner splices in, in the order of the image tokens.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from rne_tools.encoders.gemma4_reference import replace_clamps_and_norms
from rne_tools.errors import ExportError

# The budgets Gemma 4's image processor accepts (image_processing_pil_gemma4).
SOFT_TOKEN_BUDGETS = (70, 140, 280, 560, 1120)


def reference_image_embeddings(
    model: nn.Module, pixel_values: torch.Tensor, position_ids: torch.Tensor
) -> torch.Tensor:
    """transformers' own image embeddings for one image: ``get_image_features``'s pooled output,
    ``[num_soft_tokens, text_hidden]`` (what ``Gemma4Model.forward`` scatters into the image
    token positions)."""
    with torch.no_grad():
        out = model.model.get_image_features(pixel_values, position_ids, return_dict=True)
    (embeddings,) = out.pooler_output
    return embeddings


class VisionEncoder(nn.Module):
    """``vision_encoder(pixel_values[1, P, 3*patch^2] f32, position_ids[1, P, 2] i64)
    -> [P / pooling^2, text_hidden] f32``: transformers' vision path with a fixed output shape
    (the rows past the image's soft tokens are zero; see the module docstring)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.tower = model.model.vision_tower
        self.embed = model.model.embed_vision

    def forward(self, pixel_values: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        tower = self.tower
        kernel = tower.config.pooling_kernel_size
        length = pixel_values.shape[-2] // (kernel * kernel)
        padding = (position_ids == -1).all(dim=-1)
        hidden = tower.patch_embedder(pixel_values, position_ids, padding)
        hidden = tower.encoder(
            inputs_embeds=hidden, attention_mask=~padding, pixel_position_ids=position_ids
        ).last_hidden_state
        hidden, valid = tower.pooler(
            hidden_states=hidden,
            pixel_position_ids=position_ids,
            padding_positions=padding,
            output_length=length,
        )
        if tower.config.standardize:
            hidden = (hidden - tower.std_bias.float()) * tower.std_scale.float()
        hidden = hidden.to(pixel_values.dtype)
        embeddings = self.embed(inputs_embeds=hidden)
        return torch.where(valid[..., None], embeddings, 0.0)[0]


class _RotationAttention(nn.Module):
    """``Gemma4VisionAttention`` with its 2-D RoPE as ``x * cos + linear(x, R) * sin``.

    transformers splits each head into one part per axis, rotates each half by half (slices and
    a concatenation) and concatenates the parts; ``R`` is that block-diagonal rotate-half as a
    constant signed permutation (entries 0 and +-1, so exact in float), which XNNPACK runs
    inside the layer's delegate instead of leaving splits and slices to the portable kernels.
    The attention is transformers' eager arithmetic (``scores * scaling + mask``, float32
    softmax) as ``[heads, P, head_dim]`` matmuls."""

    def __init__(self, attention: nn.Module, axes: int = 2) -> None:
        super().__init__()
        self.attention = attention
        head_dim = attention.head_dim
        part = 2 * (head_dim // (2 * axes))
        if part * axes != head_dim:
            raise ExportError(f"vision head_dim {head_dim} does not split into {axes} RoPE axes.")
        half = part // 2
        rotation = torch.zeros(head_dim, head_dim)
        for start in range(0, head_dim, part):
            first = torch.arange(start, start + half)
            # rotate_half of a part: out[:half] = -x[half:], out[half:] = x[:half].
            rotation[first, first + half] = -1.0
            rotation[first + half, first] = 1.0
        self.register_buffer("rotation", rotation, persistent=False)

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return x * cos + nn.functional.linear(x, self.rotation.to(x.dtype)) * sin

    def forward(self, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, ...],
                attention_mask: torch.Tensor | None = None, **_: Any) -> tuple[torch.Tensor, None]:
        a = self.attention
        shape = (*hidden_states.shape[:-1], -1, a.head_dim)
        cos, sin = (t.unsqueeze(2) for t in position_embeddings)
        q = self._rope(a.q_norm(a.q_proj(hidden_states).view(shape)), cos, sin).transpose(1, 2)
        k = self._rope(a.k_norm(a.k_proj(hidden_states).view(shape)), cos, sin).transpose(1, 2)
        v = a.v_norm(a.v_proj(hidden_states).view(shape)).transpose(1, 2)
        if a.num_key_value_groups != 1:
            raise ExportError("vision attention with grouped kv heads is not supported here.")
        # Batch 1: [H, P, D] matmuls (4-D matmuls became expand copies outside the delegate).
        heads, length = q.shape[1], q.shape[2]
        q, k, v = (x.reshape(heads, length, a.head_dim) for x in (q, k, v))
        scores = torch.bmm(q, k.transpose(1, 2)) * a.scaling + attention_mask
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.bmm(probs, v).transpose(0, 1).reshape(*hidden_states.shape[:-1], -1)
        return a.o_proj(out), None


class _KeyBiasEncoder(nn.Module):
    """``Gemma4VisionEncoder`` with its mask as a ``[1, 1, P]`` bias on the keys.

    transformers builds a ``[1, 1, P, P]`` mask (``create_bidirectional_mask``: 0 where the key
    is a real patch, ``finfo.min`` where it is padding, the same for every query) outside the
    layers; the bias holds the same values once per key, so ``scores + bias`` is the same sum,
    and no P x P tensor is built on the portable kernels."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.rotary_emb = encoder.rotary_emb
        self.layers = encoder.layers

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor,
                pixel_position_ids: torch.Tensor) -> SimpleNamespace:
        padding = (~attention_mask).to(inputs_embeds.dtype)
        bias = (padding * torch.finfo(inputs_embeds.dtype).min)[:, None, :]
        hidden = inputs_embeds
        position_embeddings = self.rotary_emb(hidden, pixel_position_ids)
        for layer in self.layers:
            hidden = layer(hidden, attention_mask=bias, position_embeddings=position_embeddings,
                           position_ids=pixel_position_ids)
        return SimpleNamespace(last_hidden_state=hidden)


def for_xnnpack(encoder: VisionEncoder) -> VisionEncoder:
    """A copy rewritten into forms ExecuTorch's XNNPACK partitioner takes, computing the same
    function (the export checks it against transformers):

    - the MLPs' tanh GELU through a sigmoid: the partitioner takes ``aten.gelu`` without its
      ``approximate`` argument and runs the erf GELU, which moved the tiny model's embeddings by
      7.6e-4 of their std (fp32 rounding alone: 1e-5). The text models swap theirs the same way
      (``export.backends.xnnpack_ops``);
    - RMSNorm over a 4-D view (XNNPACK's mean takes only the two innermost dims of a 4-D
      tensor), ``rsqrt`` for ``pow(-0.5)``: ``xnnpack_ops.FourDimRMSNorm``;
    - the clipped linears' bounds as scalars (``gemma4_reference.ScalarClampLinear``);
    - the 2-D RoPE's splits and slices as one constant rotation, the attention as 3-D matmuls
      (``_RotationAttention``) with the padding mask as a bias on the keys (``_KeyBiasEncoder``).
    """
    from rne_tools.export.backends.xnnpack_ops import SigmoidGeluTanh

    encoder = copy.deepcopy(encoder)
    for layer in encoder.tower.encoder.layers:
        if layer.mlp.config.hidden_activation != "gelu_pytorch_tanh":
            raise ExportError(
                f"vision hidden_activation {layer.mlp.config.hidden_activation!r} is not "
                "supported (gelu_pytorch_tanh)."
            )
        layer.mlp.act_fn = SigmoidGeluTanh()
        layer.self_attn = _RotationAttention(layer.self_attn)
    replace_clamps_and_norms(encoder)
    encoder.tower.encoder = _KeyBiasEncoder(encoder.tower.encoder)
    return encoder

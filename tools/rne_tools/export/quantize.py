"""Weight quantization with torchao, shared by backends that lower torchao's quantized ops."""

from __future__ import annotations

import torch
from torch import nn

from rne_tools.errors import ExportError


def quantize_8da4w(
    model: nn.Module, group_size: int = 32, embedding_quantization: str = "8w"
) -> list[str]:
    """Quantize linears to 8-bit dynamic activations + 4-bit grouped weights, embeddings to
    8-bit per-row or 4-bit grouped weights (``embedding_quantization``: "8w", "4w", "none").

    Embeddings are quantized first, so a tied output head is quantized as a linear of its own.
    Returns the names of linears left in float because ``group_size`` does not divide their
    input width.
    """
    return _quantize(model, torch.int4, group_size, embedding_quantization)


def quantize_8da8w(model: nn.Module, embedding_quantization: str = "8w") -> list[str]:
    """Quantize linears to 8-bit dynamic activations + 8-bit per-channel weights (XNNPACK's
    qd8-f32-qc8w kernels), embeddings as in ``quantize_8da4w``: about 4x smaller than fp32 and
    closer to it than 4-bit weights (SmolLM2, whose checkpoint was already 4-bit once: top-1
    agreement with fp32 90% vs 68% for 8da4w, tools/benchmarks/quant_quality.py). Returns []
    (every linear is quantized)."""
    return _quantize(model, torch.int8, 32, embedding_quantization)


def quantize_8w(model: nn.Module, embedding_quantization: str = "8w") -> list[str]:
    """Quantize linears to 8-bit per-channel weights with float activations (XNNPACK's
    f32-qc8w kernels), embeddings as in ``quantize_8da4w``. The same 4x smaller weights as
    8da8w without rounding the activations, which is where 8da8w loses SmolLM2 (top-1
    agreement with fp32: 95.7% vs 91%). Returns [] (every linear is quantized)."""
    return _quantize(model, torch.int8, 32, embedding_quantization, dynamic_activations=False)


def _quantize(
    model: nn.Module,
    weight_dtype: torch.dtype,
    group_size: int,
    embedding_quantization: str,
    dynamic_activations: bool = True,
) -> list[str]:
    from torchao.quantization import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
        quantize_,
    )
    from torchao.quantization.granularity import PerAxis, PerGroup

    if group_size <= 0 or group_size % 2:
        raise ExportError(f"group size must be a positive even number, got {group_size}.")
    if embedding_quantization != "none":
        bits, granularity = {
            "8w": (torch.int8, PerAxis(0)),
            "4w": (torch.int4, PerGroup(group_size)),
        }[embedding_quantization]
        quantize_(
            model,
            IntxWeightOnlyConfig(weight_dtype=bits, granularity=granularity),
            filter_fn=lambda m, fqn: (
                isinstance(m, nn.Embedding)
                and (embedding_quantization == "8w" or m.embedding_dim % group_size == 0)
            ),
        )
    # Grouped 4-bit weights need the group size to divide the input width; per-channel 8-bit
    # weights take every linear.
    per_channel = weight_dtype == torch.int8

    def fits(m: nn.Module) -> bool:
        return per_channel or m.in_features % group_size == 0

    skipped = [
        name for name, m in model.named_modules() if isinstance(m, nn.Linear) and not fits(m)
    ]
    granularity = PerAxis(0) if per_channel else PerGroup(group_size)
    config = (
        Int8DynamicActivationIntxWeightConfig(
            weight_dtype=weight_dtype, weight_granularity=granularity
        )
        if dynamic_activations
        else IntxWeightOnlyConfig(weight_dtype=weight_dtype, granularity=granularity)
    )
    quantize_(model, config, filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and fits(m))
    return skipped

"""MLX backend (Apple GPU, iOS): int4 grouped weights, bf16 activations, compile-friendly graph.

The decode graph carries no data-dependent scalar: RoPE takes its offset as a tensor, caches are
written by tensor-indexed ``index_copy``, attention slices nothing by position (see
``backends.mlx_ops``), so MLX can trace and replay it. Prefill chunks are capped by the sliding
window (and 512) because a one-shot prefill spikes GPU memory.
"""

from __future__ import annotations

import collections
from typing import Any

import torch
from torch import nn

from rne_tools.backend_catalog import load_catalog
from rne_tools.checks.delegation import delegation_by_op
from rne_tools.checks.transform import check_transform
from rne_tools.errors import ExportError, VerificationError
from rne_tools.export.backends import (
    Backend,
    ExportOptions,
    TransformResult,
    check_quantization,
    require_architecture,
)

GROUP_SIZES = (32, 64, 128)  # the group sizes MLX's fused quantized matmul kernels exist for
MAX_CHUNK = 512
# MLX instructions that read a runtime scalar out of a tensor: none may appear.
DATA_DEPENDENT_NODES = ("ItemIntNode",)


class MLXBackend(Backend):
    name = "mlx"
    runtime_name = load_catalog().backend("mlx").runtime
    allowed_quantizations = ("int4",)
    # bf16 activations (quantize() casts the model): verified against the same weights in fp32.
    compute_dtype = torch.bfloat16

    def validate(self, options: ExportOptions) -> None:
        check_quantization(self, options)
        require_architecture(self, options.architecture, ("gemma4",))
        if options.group_size not in GROUP_SIZES:
            raise ExportError(
                f"MLX fuses int4 weights into quantized matmuls for group sizes "
                f"{', '.join(map(str, GROUP_SIZES))} only; got {options.group_size}."
            )
        if options.embedding_quantization != "4w":
            raise ExportError(
                "MLX int4 quantizes the embedding tables with the linears' 4-bit grouped config "
                "so the tied output head is stored once; pass --embedding-quantization 4w "
                f"(got {options.embedding_quantization!r})."
            )
        if options.max_chunk > MAX_CHUNK:
            raise ExportError(
                f"MLX exports cap the prefill chunk at {MAX_CHUNK} (and at the sliding window); "
                f"got --max-chunk {options.max_chunk}. Allowed: 1..{MAX_CHUNK}."
            )

    def transform(self, model: nn.Module, options: ExportOptions) -> TransformResult:
        from rne_tools.export.backends.mlx_ops import apply_mlx_transforms

        window = model.args.sliding_window
        if options.max_chunk > window:
            raise ExportError(
                f"MLX exports cap the prefill chunk at the sliding window ({window}); got "
                f"--max-chunk {options.max_chunk}. Allowed: 1..{min(window, MAX_CHUNK)}."
            )
        return TransformResult(*check_transform(model, apply_mlx_transforms))

    def quantize(self, model: nn.Module, options: ExportOptions) -> nn.Module:
        from torchao.quantization import IntxWeightOnlyConfig
        from torchao.quantization.granularity import PerGroup

        from rne_tools.export.quantize import quantize_weights

        model.to_dtype(torch.bfloat16)
        gs = options.group_size
        config = IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(gs))
        tied = model.args.tie_word_embeddings
        quantize_weights(
            model, config, lambda m, fqn: isinstance(m, nn.Embedding) and m.embedding_dim % gs == 0
        )
        quantize_weights(
            model,
            config,
            lambda m, fqn: (
                isinstance(m, nn.Linear)
                and m.in_features % gs == 0
                and not (tied and fqn == "output")
            ),
        )
        if tied:  # the head reuses the quantized table: one copy of the weights in the file
            model.output.weight = model.tok_embeddings.weight
        model.left_unquantized = [
            name
            for name, m in model.named_modules()
            if isinstance(m, nn.Linear | nn.Embedding)
            and type(m.weight) in (torch.Tensor, nn.Parameter)
        ]
        return model

    def partitioners(self, options: ExportOptions) -> list[Any]:
        from rne_tools.export.backends.mlx_ops import register_mlx_handlers

        register_mlx_handlers()
        from executorch.backends.mlx import MLXPartitioner

        return [MLXPartitioner()]

    def transform_passes(self, options: ExportOptions) -> list[Any]:
        from executorch.backends.mlx.passes import get_default_passes

        return get_default_passes()

    def compile_config(self) -> Any:
        from executorch.exir import EdgeCompileConfig

        return EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True)

    def inspect(self, model: nn.Module, program: Any, options: ExportOptions) -> dict[str, Any]:
        """MLX instruction histogram of the delegate(s); raises
        VerificationError if anything runs outside MLX or reads a data-dependent scalar."""
        ops = mlx_instructions(program.buffer)
        outside = {op: c["cpu"] for op, c in delegation_by_op(program).items() if c["cpu"]}
        bad = {k: v for k, v in ops.items() if k in DATA_DEPENDENT_NODES}
        report = {
            "mlx_instructions": dict(sorted(ops.items())),
            "ops_outside_mlx": outside,
            "left_unquantized": getattr(model, "left_unquantized", []),
        }
        if outside or bad:
            raise VerificationError(
                f"MLX export is not fully delegated/compile-friendly: outside MLX {outside}, "
                f"data-dependent scalars {bad}."
            )
        return report


def mlx_instructions(pte: bytes) -> collections.Counter[str]:
    """Histogram of MLX instruction types over every MLX delegate in a serialized program."""
    from rne_tools.export.backends import mlx_schema

    mlx_schema.install()
    from executorch.backends.mlx import pte_inspector

    counts: collections.Counter[str] = collections.Counter()
    for index, _ in enumerate(pte_inspector._find_mlx_delegates(pte)):
        payload = pte_inspector._load_mlx_payload(pte, index)
        graph = pte_inspector.parse_mlx_flatbuffer(payload.fb_data)
        for chain in graph["instruction_chains"]:
            counts.update(i.get("op_name", "?") for i in chain["instructions"])
    return counts


BACKEND = MLXBackend()

"""MLX backend (Apple GPU, iOS): int4 grouped weights, bf16 activations.

The graph reads one scalar out of a tensor, the chunk's start from the ``input_pos`` input, for
the full-attention layers to attend over the written slots only (an ``ItemIntNode`` evaluates
that input, which depends on nothing, so it costs no flush of queued work); RoPE takes its
offset as a tensor and caches are written by tensor-indexed ``index_copy`` (see
``backends.mlx_ops``). Prefill chunks are capped by the sliding window (and 512) because a
one-shot prefill spikes GPU memory.
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
# The MLX instruction that reads a runtime scalar out of a tensor: only of ``input_pos``.
ITEM_NODE = "ItemIntNode"


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
        """MLX instruction histogram of the delegate(s); raises VerificationError if anything
        runs outside MLX or reads a scalar out of any tensor but ``input_pos``."""
        graphs = mlx_graphs(program.buffer)
        ops = instruction_histogram(graphs)
        outside = {op: c["cpu"] for op, c in delegation_by_op(program).items() if c["cpu"]}
        bad = sum(len(items_not_of_input(g, INPUT_POS)) for g in graphs)
        report = {
            "mlx_instructions": dict(sorted(ops.items())),
            "ops_outside_mlx": outside,
            "left_unquantized": getattr(model, "left_unquantized", []),
        }
        if outside or bad:
            raise VerificationError(
                f"MLX export is not fully delegated or reads data-dependent scalars: outside MLX "
                f"{outside}, {bad} {ITEM_NODE}(s) reading a tensor other than input_pos."
            )
        return report


# forward(tokens, input_pos): the graph input the chunk's start is read from.
INPUT_POS = 1


def mlx_graphs(pte: bytes) -> list[dict[str, Any]]:
    """Every MLX delegate's graph in a serialized program, parsed by the wheel's inspector."""
    from rne_tools.export.backends import mlx_schema

    mlx_schema.install()
    from executorch.backends.mlx import pte_inspector

    return [
        pte_inspector.parse_mlx_flatbuffer(pte_inspector._load_mlx_payload(pte, index).fb_data)
        for index, _ in enumerate(pte_inspector._find_mlx_delegates(pte))
    ]


def instruction_histogram(graphs: list[dict[str, Any]]) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for graph in graphs:
        for chain in graph["instruction_chains"]:
            counts.update(i.get("op_name", "?") for i in chain["instructions"])
    return counts


# Instructions that only select or re-view elements of their ``x``: a scalar read through them
# still reads the tensor they were applied to.
_SELECTIONS = ("TakeNode", "SliceNode", "ReshapeNode", "SqueezeNode", "ExpandDimsNode",
               "AsTypeNode", "IdCopyNode")


def items_not_of_input(graph: dict[str, Any], input_index: int) -> list[dict[str, Any]]:
    """The graph's scalar reads (``ItemIntNode``) of anything but elements of input
    ``input_index``, followed back through selections (``input_pos[0]`` is a ``TakeNode``)."""
    allowed = graph["input_map"][input_index]["idx"]
    bad = []
    for chain in graph["instruction_chains"]:
        instructions = chain["instructions"]
        for at, instruction in enumerate(instructions):
            if instruction.get("op_name") != ITEM_NODE:
                continue
            tid = instruction["x"]["tid"]
            # Temporaries are reused: the value read is the last one written before the read.
            for earlier in reversed(instructions[:at]):
                if tid == allowed:
                    break
                if earlier.get("out", {}).get("tid") != tid:
                    continue
                if earlier.get("op_name") not in _SELECTIONS:
                    break
                tid = earlier["x"]["tid"]
            if tid != allowed:
                bad.append(instruction)
    return bad


BACKEND = MLXBackend()

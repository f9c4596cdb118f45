"""MLX backend (Apple GPU, iOS): int4 grouped weights, bf16 activations.

The graph reads one scalar out of a tensor, the chunk's start from the ``input_pos`` input, for
the full-attention layers to attend over the written slots only (an ``ItemIntNode`` evaluates
that input, which depends on nothing, so it costs no flush of queued work); RoPE takes its
offset as a tensor and caches are written by tensor-indexed ``index_copy`` (see
``backends.mlx_ops``). Prefill chunks are capped by the sliding window (and 512) because a
one-shot prefill spikes GPU memory.

Tables the head does not read (Gemma 4's per-layer table, half of E2B's file) are looked up on
the CPU from the mapped program (``export.host_tables``): MLX evaluates every constant of its
delegate at load, so in the delegate the whole table would be the app's memory. The token table
stays in the delegate, where the tied head reads it.
"""

from __future__ import annotations

import collections
import json
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
)
from rne_tools.export.host_tables import host_tables, traced_in_host_table

GROUP_SIZES = (32, 64, 128)  # the group sizes MLX's fused quantized matmul kernels exist for
MAX_CHUNK = 512
# The MLX instruction that reads a runtime scalar out of a tensor: only of ``input_pos``.
ITEM_NODE = "ItemIntNode"


class MLXBackend(Backend):
    name = "mlx"
    runtime_name = load_catalog().backend("mlx").runtime
    allowed_quantizations = ("int4",)
    verify_problem = (
        "MLX programs keep their KV caches inside the delegate; a verify method needs the "
        "delegate to share them between methods, which no runtime on this host can execute to "
        "verify"
    )
    # bf16 activations (quantize() casts the model): verified against the same weights in fp32.
    compute_dtype = torch.bfloat16

    def validate(self, options: ExportOptions) -> None:
        check_quantization(self, options)
        if options.group_size not in GROUP_SIZES:
            raise ExportError(
                f"MLX fuses int4 weights into quantized matmuls for group sizes "
                f"{', '.join(map(str, GROUP_SIZES))} only; got {options.group_size}."
            )
        if options.table_group_size != options.group_size:
            raise ExportError(
                "MLX groups its tables like its linears (its head reads the token table); drop "
                f"--embedding-group-size or make it --group-size ({options.group_size})."
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
        model.host_tables = host_tables(model, torch.bfloat16, keep_tied=True)
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
        return [_partitioner_leaving_host_tables()]

    def transform_passes(self, options: ExportOptions) -> list[Any]:
        from executorch.backends.mlx.passes import get_default_passes

        return get_default_passes()

    def compile_config(self) -> Any:
        from executorch.exir import EdgeCompileConfig

        return EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True)

    def inspect(self, model: nn.Module, program: Any, options: ExportOptions) -> dict[str, Any]:
        """MLX instruction histogram of the delegate(s); raises VerificationError if anything
        but one lookup per hosted table runs outside MLX, or if the graph reads a scalar out of
        any tensor but ``input_pos``."""
        graphs = mlx_graphs(program.buffer)
        ops = instruction_histogram(graphs)
        outside = {op: c["cpu"] for op, c in delegation_by_op(program).items() if c["cpu"]}
        hosted = getattr(model, "host_tables", [])
        lookups = sum(c for op, c in outside.items() if op in HOST_LOOKUPS)
        unexpected = {op: c for op, c in outside.items() if op not in HOST_LOOKUPS}
        positions = delegate_input_indices(program.buffer, INPUT_POS)
        bad = sum(len(items_not_of_input(g, at)) for g, at in zip(graphs, positions, strict=True))
        report = {
            "mlx_instructions": dict(sorted(ops.items())),
            "ops_outside_mlx": outside,
            "host_tables": hosted,
            "left_unquantized": getattr(model, "left_unquantized", []),
        }
        if unexpected or lookups != len(hosted) or bad:
            raise VerificationError(
                f"MLX export is not fully delegated or reads data-dependent scalars: outside MLX "
                f"{outside} (expected one lookup for each of the tables {hosted}), {bad} "
                f"{ITEM_NODE}(s) reading a tensor other than input_pos."
            )
        return report


# The CPU kernels a hosted table's lookup becomes (4-bit, 8-bit, float).
HOST_LOOKUPS = (
    "quantized_decomposed_embedding_4bit_dtype",
    "quantized_decomposed_embedding_4bit_default",
    "quantized_decomposed_embedding_byte_dtype",
    "quantized_decomposed_embedding_byte_default",
    "aten_embedding_default",
)


def _partitioner_leaving_host_tables() -> Any:
    """MLX's partitioner, with the nodes traced inside a hosted table taken out of its
    partitions (it has no module blocklist). Their ops stay undecomposed, so ``to_executorch``
    fuses each lookup into a CPU kernel."""
    from executorch.backends.mlx import MLXPartitioner

    class HostTablesOnCpu(MLXPartitioner):  # type: ignore[misc]
        def generate_partitions(self, edge_program: Any) -> list[Any]:
            partitions = super().generate_partitions(edge_program)
            for partition in partitions:
                for node in [n for n in partition.nodes if traced_in_host_table(n)]:
                    partition.remove_node(node)
            return [p for p in partitions if p.nodes]

    return HostTablesOnCpu()


# forward(tokens, input_pos): the program input the chunk's start is read from.
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


def delegate_input_indices(pte: bytes, program_input: int) -> list[int]:
    """For each MLX delegate in a serialized program, in the order ``mlx_graphs`` returns them,
    which of its inputs is the program's input ``program_input`` (a hosted table's rows are
    delegate inputs too, so the order of the delegate's inputs is not the program's); -1 where
    it does not take that input."""
    from executorch.exir._serialize._flatbuffer import _program_flatbuffer_to_json

    plan = json.loads(_program_flatbuffer_to_json(pte))["execution_plan"][0]
    mlx_ids = [i for i, d in enumerate(plan["delegates"]) if "mlx" in d["id"].lower()]
    value = plan["inputs"][program_input]
    found = {i: -1 for i in mlx_ids}
    for chain in plan["chains"]:
        for instruction in chain["instructions"]:
            call = instruction["instr_args"]
            if instruction["instr_args_type"] == "DelegateCall" and call["delegate_index"] in found:
                # A delegate call's args are its inputs, then its outputs.
                args = call["args"]
                found[call["delegate_index"]] = args.index(value) if value in args else -1
    return [found[i] for i in mlx_ids]


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
    ``input_index`` (-1: of no input), followed back through selections (``input_pos[0]`` is a
    ``TakeNode``)."""
    allowed = graph["input_map"][input_index]["idx"] if input_index >= 0 else -1
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

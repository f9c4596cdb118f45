"""Lowering: traced methods -> an ExecuTorch program, for every program this package exports.

A ``Lowering`` holds everything that decides how a traced graph becomes a program, as values
(partitioners, passes, the edge compile config, the emit config), and ``lower`` applies one.
The export cache keys the lowering by those values and by ``lower``'s code
(``lowering_fingerprint``): the code that builds a ``Lowering`` (the text models' and the
encoders') can be rearranged, merged or moved without re-exporting anything, while a changed
value, a changed backend hook or a changed ``lower`` re-keys the programs it affects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rne_tools.export.fingerprint import code_fingerprint, value_fingerprint


@dataclass(frozen=True)
class Lowering:
    partitioners: list[Any]
    # The ``EdgeCompileConfig``.
    compile_config: Any
    # The ``ExecutorchBackendConfig``: memory planning, segments, quant fusion.
    emit_config: Any
    # Graph passes run before partitioning (e.g. MLX's fusions); None: ExecuTorch's default.
    transform_passes: list[Any] | None = None
    # Run on every method's edge graph after partitioning, before ``to_executorch``.
    edge_passes: tuple[Callable[[torch.fx.GraphModule], object], ...] = ()


def lower(methods: dict[str, Any], lowering: Lowering, constants: dict[str, Any]) -> Any:
    """Lower the traced ``methods`` (name -> ``ExportedProgram``) into one program with the
    constant methods ``constants``. Methods over the same mutable buffers share them only if
    ``lowering.emit_config``'s memory planning says so."""
    from executorch.exir import to_edge_transform_and_lower

    edge = to_edge_transform_and_lower(
        methods,
        transform_passes=lowering.transform_passes,
        partitioner=lowering.partitioners,
        compile_config=lowering.compile_config,
        constant_methods=constants,
    )
    for name in methods:
        for edge_pass in lowering.edge_passes:
            edge_pass(edge.exported_program(name).graph_module)
    return edge.to_executorch(lowering.emit_config)


def lowering_fingerprint(lowering: Lowering, *hooks: Any) -> str:
    """What the program and its report owe to lowering: ``lowering``'s values, ``lower``'s code,
    and ``hooks`` by meaning: the code that built ``lowering`` where it may also act beside its
    values (a backend hook that patches a library), and the code that writes the report."""
    return value_fingerprint(lowering) + code_fingerprint(lower, *hooks)

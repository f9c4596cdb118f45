"""What a ``.pte`` file's bytes are: its constant segment, delegate data and the rest.

The runner treats the parts differently (docs/design.md, "Runtime"): delegate data is packed or
uploaded by its backend and then given back, while the constant segment, the tables CPU ops
index by token, stays mapped and is read a row at a time. Sizes come from the program's
flatbuffer alone (the extended header says how long it is), so a multi-GB file is not read.

``vulkan_constants`` lists what a Vulkan delegate uploads: each constant of its serialized graph
with its place in the file; ``vulkan_ops`` what it runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from rne_tools.errors import RneError


@dataclass(frozen=True)
class PteParts:
    constant: int  # the constant segment: tensors CPU ops read (embedding tables)
    delegate: int  # delegate blobs and named data: what backends pack or upload
    total: int  # the file's size

    @property
    def other(self) -> int:
        """The program itself and alignment padding."""
        return self.total - self.constant - self.delegate


def _program(f: BinaryIO, path: Path) -> tuple[Any, int]:
    """The program flatbuffer of the open ``.pte`` and the file offset its segments count from;
    ``RneError`` if it is not a segmented ``.pte`` (no extended header)."""
    from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
    from executorch.exir._serialize._program import _get_extended_header

    header = _get_extended_header(f.read(64))
    if header is None:
        raise RneError(f"{path}: no extended header; not a .pte with segments")
    f.seek(0)
    return _flatbuffer_to_program(f.read(header.program_size)), header.segment_base_offset


def pte_parts(path: Path) -> PteParts:
    """Bytes of each part of the program at ``path``; ``RneError`` if it is not a segmented
    ``.pte`` (no extended header)."""
    with Path(path).open("rb") as f:
        program, _ = _program(f, Path(path))
    sizes = [s.size for s in program.segments]
    constant = sizes[program.constant_segment.segment_index] if program.constant_segment else 0
    delegate = sum(
        sizes[d.processed.index]
        for plan in program.execution_plan
        for d in plan.delegates
        if d.processed.location.name == "SEGMENT"
    ) + sum(sizes[n.segment_index] for n in program.named_data or [])
    return PteParts(constant, delegate, Path(path).stat().st_size)


@dataclass(frozen=True)
class VulkanConstant:
    dims: tuple[int, ...]
    dtype: str  # the graph's VkDataType name: UINT8 / INT8 (packed weights), INT32, FLOAT16...
    key: str  # named-data key, the sha256 of the bytes: equal tensors share one copy in the file
    offset: int  # of the bytes in the file
    length: int


def _vulkan_graphs(f: BinaryIO, path: Path) -> Iterator[tuple[Any, Any, int]]:
    """Each Vulkan delegate's serialized graph in the open ``.pte``, with the program and the
    file offset its segments count from."""
    from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
        VulkanDelegateHeader,
        flatbuffer_to_vk_graph,
    )

    program, base = _program(f, path)
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            if delegate.id != "VulkanBackend":
                continue
            blob = base + program.segments[delegate.processed.index].offset
            f.seek(blob)
            header = VulkanDelegateHeader.from_bytes(f.read(VulkanDelegateHeader.EXPECTED_LENGTH))
            f.seek(blob + header.flatbuffer_offset)
            yield flatbuffer_to_vk_graph(f.read(header.flatbuffer_size)), program, base


def vulkan_constants(path: Path) -> list[VulkanConstant]:
    """Every constant tensor of every Vulkan delegate in the program at ``path``, in graph order
    (a tensor used twice is listed twice, under one key)."""
    from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkDataType, VkTensor

    found = []
    with Path(path).open("rb") as f:
        for graph, program, base in _vulkan_graphs(f, Path(path)):
            named = {d.key: program.segments[d.segment_index] for d in program.named_data or []}
            for value in graph.values:
                tensor = value.value
                if not isinstance(tensor, VkTensor) or tensor.constant_id < 0:
                    continue
                const = graph.constants[tensor.constant_id]
                if not const.named_key:  # inline bytes (none in today's exports)
                    raise RneError(f"{path}: a Vulkan constant without a named key")
                segment = named[const.named_key]
                found.append(VulkanConstant(
                    tuple(tensor.dims), VkDataType(tensor.datatype).name, const.named_key,
                    base + segment.offset, const.length,
                ))
    return found


@dataclass(frozen=True)
class VulkanOp:
    name: str  # the operator, e.g. "aten.clone.default"
    tensors: tuple[tuple[int, ...], ...]  # its tensor arguments' largest dims, in order
    ids: tuple[int, ...]  # the same arguments' value ids in the graph


def vulkan_ops(path: Path) -> list[VulkanOp]:
    """Every operator every Vulkan delegate in the program at ``path`` runs, in order, with the
    tensors it takes and writes (a tensor whose size follows the data has its upper bound)."""
    from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkTensor

    found = []
    with Path(path).open("rb") as f:
        for graph, _, _ in _vulkan_graphs(f, Path(path)):
            for op in graph.chain:
                tensors = [(i, graph.values[i].value) for i in op.args]
                tensors = [(i, v) for i, v in tensors if isinstance(v, VkTensor)]
                found.append(VulkanOp(op.name, tuple(tuple(v.dims) for _, v in tensors),
                                      tuple(i for i, _ in tensors)))
    return found


def evict_from_page_cache(path: Path) -> None:
    """Drop ``path``'s clean pages from the page cache, so the next process that maps it starts
    cold. Pages already cached (a file just written) come back in whole large folios: one token's
    lookup would map megabytes of its neighbours, which a device that had reclaimed them would
    not see."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)

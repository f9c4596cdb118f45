"""What a ``.pte`` file's bytes are: its constant segment, delegate data and the rest.

The runner treats the parts differently (docs/design.md, "Runtime"): delegate data is packed or
uploaded by its backend and then given back, while the constant segment, the tables CPU ops
index by token, stays mapped and is read a row at a time. Sizes come from the program's
flatbuffer alone (the extended header says how long it is), so a multi-GB file is not read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

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


def pte_parts(path: Path) -> PteParts:
    """Bytes of each part of the program at ``path``; ``RneError`` if it is not a segmented
    ``.pte`` (no extended header)."""
    from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
    from executorch.exir._serialize._program import _get_extended_header

    with Path(path).open("rb") as f:
        header = _get_extended_header(f.read(64))
        if header is None:
            raise RneError(f"{path}: no extended header; not a .pte with segments")
        f.seek(0)
        program = _flatbuffer_to_program(f.read(header.program_size))
    sizes = [s.size for s in program.segments]
    constant = sizes[program.constant_segment.segment_index] if program.constant_segment else 0
    delegate = sum(
        sizes[d.processed.index]
        for plan in program.execution_plan
        for d in plan.delegates
        if d.processed.location.name == "SEGMENT"
    ) + sum(sizes[n.segment_index] for n in program.named_data or [])
    return PteParts(constant, delegate, Path(path).stat().st_size)


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

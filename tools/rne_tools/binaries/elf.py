"""What the loader sees of an ELF shared object: its loadable segments' alignment.

Android 15+ devices may use 16 KB pages, and Google Play requires apps that target them to ship
native libraries whose ``PT_LOAD`` segments are aligned to at least 16 KB. The check reads the
program headers directly, so it works on any host for any of our ABIs (arm64-v8a, x86_64).
"""

from __future__ import annotations

import struct
from pathlib import Path

PAGE_16K = 16 * 1024
_PT_LOAD = 1


class ElfError(ValueError):
    """The file is not a 64-bit little-endian ELF object."""


def load_segment_alignments(path: Path) -> list[int]:
    """``p_align`` of every ``PT_LOAD`` segment of the ELF64 object at ``path``, in file order."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        raise ElfError(f"{path} is not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: only 64-bit little-endian ELF is shipped (class {data[4]}, "
                       f"data {data[5]})")
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    if phoff + phentsize * phnum > len(data) or phentsize < 56:
        raise ElfError(f"{path}: the program header table lies outside the file")
    alignments = []
    for i in range(phnum):
        p_type = struct.unpack_from("<I", data, phoff + i * phentsize)[0]
        if p_type == _PT_LOAD:
            alignments.append(struct.unpack_from("<Q", data, phoff + i * phentsize + 48)[0])
    return alignments


def misaligned_segments(path: Path, page: int = PAGE_16K) -> list[int]:
    """The ``PT_LOAD`` alignments of ``path`` below ``page`` (empty when it loads on such pages)."""
    return [a for a in load_segment_alignments(path) if a < page]

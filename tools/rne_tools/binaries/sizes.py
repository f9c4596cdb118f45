"""What each component of a build costs an app in bytes: the size table of a build manifest.

A build against a wheel's C++ SDK (``host`` x86-64, ``linux-arm64``) ships the SDK's shared
libraries next to our own code, so its components are files: ExecuTorch's runtime (with its
thread pool), its CPU kernels, the XNNPACK delegate, and our core (the Node-API module
``rne_node.node``: seam, runner, tokenizer, grammar, chat templates and the LLM custom ops, the
same code the app's JSI library holds). Each is measured twice: bytes on disk and bytes the
loader maps (``PT_LOAD`` file sizes: what remains after stripping symbols). ``tests/
test_binary_size_budget.py`` holds each against ``third-party/binary-size-budget.json``.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from rne_tools.binaries.elf import ElfError
from rne_tools.binaries.errors import ManifestError

# Component -> the SDK's shared libraries that make it up (executorch/lib of the wheel).
SDK_COMPONENTS: dict[str, tuple[str, ...]] = {
    "runtime": ("libexecutorch.so", "libexecutorch_threadpool.so"),
    "kernels": ("libexecutorch_kernels_optimized.so", "libexecutorch_kernels_quantized.so"),
    "xnnpack": ("libexecutorch_backend_xnnpack.so",),
}
CORE_MODULE = "node/rne_node.node"
_PT_LOAD = 1


def loaded_bytes(path: Path) -> int:
    """Sum of ``p_filesz`` over the ``PT_LOAD`` segments of the ELF64 object at ``path``."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path} is not a 64-bit little-endian ELF file")
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    if phoff + phentsize * phnum > len(data) or phentsize < 56:
        raise ElfError(f"{path}: the program header table lies outside the file")
    total = 0
    for i in range(phnum):
        base = phoff + i * phentsize
        if struct.unpack_from("<I", data, base)[0] == _PT_LOAD:
            total += struct.unpack_from("<Q", data, base + 32)[0]
    return total


def sdk_lib_dir(build_dir: Path) -> Path:
    """The directory of the wheel SDK's ``libexecutorch.so`` that a Ninja build links."""
    ninja = build_dir / "build.ninja"
    text = ninja.read_text() if ninja.is_file() else ""
    m = re.search(r"(/[^\s$]*)/libexecutorch\.so\b", text)
    if m is None:
        raise ManifestError(f"{ninja} links no libexecutorch.so: not a Ninja build against a "
                            "wheel's SDK")
    return Path(m.group(1)).resolve()


def _record(files: list[Path]) -> dict:
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ManifestError(f"cannot measure {', '.join(missing)}: missing")
    return {
        "files": [f.name for f in files],
        "bytes": sum(f.stat().st_size for f in files),
        "loaded_bytes": sum(loaded_bytes(f) for f in files),
    }


def wheel_build_sizes(build_dir: Path) -> dict:
    """The size table of a build against a wheel's SDK: per component, and the total."""
    lib = sdk_lib_dir(build_dir)
    table: dict[str, dict] = {}
    # The module is skipped by a build without Node's headers (cpp/node/CMakeLists.txt); the
    # budget test then fails on the missing row instead of the build failing here.
    if (build_dir / CORE_MODULE).is_file():
        table["core"] = _record([build_dir / CORE_MODULE])
    for component, names in SDK_COMPONENTS.items():
        table[component] = _record([lib / n for n in names])
    table["total"] = {
        "bytes": sum(r["bytes"] for r in table.values()),
        "loaded_bytes": sum(r["loaded_bytes"] for r in table.values()),
    }
    return table

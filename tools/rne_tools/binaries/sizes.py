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

from rne_tools.backend_catalog import BackendCatalog, load_catalog
from rne_tools.binaries.elf import ElfError
from rne_tools.binaries.errors import ManifestError


def sdk_components(catalog: BackendCatalog) -> dict[str, tuple[str, ...]]:
    """Component -> the SDK's shared libraries that make it up (executorch/lib of the wheel):
    the runtime, the CPU kernels and each backend the catalog says the SDK ships."""
    return {
        "runtime": ("libexecutorch.so", "libexecutorch_threadpool.so"),
        "kernels": ("libexecutorch_kernels_optimized.so", "libexecutorch_kernels_quantized.so"),
        **{b.name: b.sdk_libraries for b in catalog.backends if b.sdk_libraries},
    }


SDK_COMPONENTS = sdk_components(load_catalog())
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


# ---------------------------------------------------------------------------------------------
# A libexecutorch.so linked from static archives (cpp/shared_library): one file, so its
# components are found in the linker's map, which says which archive member every input section
# came from. Vulkan's SPIR-V (all its compute shaders, compiled into one generated source) is
# reported apart from the rest of the delegate's code.

SPIRV_MEMBER = "spv.cpp.o"
LINKER = "linker"  # dynamic symbols, relocations, hash tables, PLT/GOT: the linker's own bytes

# GNU ld: " .name  0xADDR  0xSIZE  file", or the name alone and the rest on the next line.
_GNU_INPUT = re.compile(r"^ (?P<name>[^\s*]\S*)(?:\s+0x[0-9a-f]+\s+0x(?P<size>[0-9a-f]+)\s+(?P<file>\S.*))?$")
_GNU_CONTINUED = re.compile(r"^\s+0x[0-9a-f]+\s+0x(?P<size>[0-9a-f]+)\s+(?P<file>\S.*)$")
# lld: VMA LMA Size Align, then the output section at 0 spaces, an input at 8, a symbol at 16.
_LLD_ROW = re.compile(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ ( *)(\S.*)$")
_MEMBER = re.compile(r"^(?P<archive>.*?\.a)\((?P<member>[^)]+)\)")


def _origin(path: str) -> tuple[str, str]:
    """(archive basename, member) of an input file name in a map; ('', file) if not an archive."""
    m = _MEMBER.match(path.strip())
    if m is None:
        return "", Path(path.strip().split(":(")[0]).name
    return Path(m.group("archive")).name, m.group("member")


def parse_link_map(text: str) -> list[tuple[str, str, str, int]]:
    """Every input section of a GNU ld or lld map: (output section, archive, member, size)."""
    rows: list[tuple[str, str, str, int]] = []
    if text.lstrip().startswith("VMA"):  # lld
        out = ""
        for line in text.splitlines()[1:]:
            m = _LLD_ROW.match(line)
            if m is None:
                continue
            size, indent, rest = int(m.group(1), 16), len(m.group(2)), m.group(3)
            if indent == 0:
                out = rest.split()[0]
            elif indent == 8 and size and ":(" in rest:
                archive, member = _origin(rest.rsplit(":(", 1)[0])
                rows.append((out, archive, member, size))
        return rows
    start = text.find("Linker script and memory map")
    if start < 0:
        raise ManifestError("not a GNU ld or lld link map (no memory map section)")
    out, pending = "", False
    for line in text[start:].splitlines()[1:]:
        if line[:1] not in (" ", ""):  # an output section (its address and size follow)
            out, pending = line.split()[0], False
            continue
        m = _GNU_INPUT.match(line)
        if m is not None:
            pending = m.group("size") is None
        elif pending:
            m, pending = _GNU_CONTINUED.match(line), False
        if m is not None and m.group("size") is not None and int(m.group("size"), 16):
            archive, member = _origin(m.group("file"))
            rows.append((out, archive, member, int(m.group("size"), 16)))
    return rows


def _loaded_sections(so: Path) -> set[str]:
    """Names of the sections of ``so`` that occupy file bytes in a loadable segment."""
    data = so.read_bytes()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff + shentsize * shnum > len(data):
        raise ElfError(f"{so}: the section header table lies outside the file")
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_off = headers[shstrndx][4]
    loaded = set()
    for name, sh_type, flags, _addr, _off, _size in headers:
        if flags & 0x2 and sh_type != 8:  # SHF_ALLOC, not SHT_NOBITS
            end = data.index(b"\0", names_off + name)
            loaded.add(data[names_off + name:end].decode())
    return loaded


def shared_library_sizes(so: Path, link_map: Path, components: dict[str, str],
                         core: Path | None = None) -> dict:
    """The size table of a ``libexecutorch.so`` linked from archives, from its link map.

    ``components`` maps an archive's file name to its component; input sections of other files
    (the C runtime's objects, the library's empty source) count as the linker's. Sizes are the
    input sections' bytes in loaded sections; ``linker`` is the rest of the loaded bytes.
    """
    for path in (so, link_map):
        if not path.is_file():
            raise ManifestError(f"cannot measure {path}: missing")
    loaded = _loaded_sections(so)
    table: dict[str, dict] = {}
    if core is not None:
        table["core"] = _record([core])
    parts: dict[str, int] = {}
    for out, archive, member, size in parse_link_map(link_map.read_text(errors="replace")):
        if out not in loaded:
            continue
        name = components.get(archive, LINKER)
        if name == "vulkan" and member == SPIRV_MEMBER:
            name = "vulkan_spirv"
        parts[name] = parts.get(name, 0) + size
    total = loaded_bytes(so)
    parts[LINKER] = total - sum(v for k, v in parts.items() if k != LINKER)
    for name in sorted(parts):
        table[name] = {"loaded_bytes": parts[name]}
    table["total"] = {"loaded_bytes": total + (table["core"]["loaded_bytes"] if core else 0)}
    return table

"""The size table of a libexecutorch.so linked from archives (tools/rne_tools/binaries/sizes.py):
bytes attributed to components from the linker's map, checked on real links made here with GNU
ld and on an lld map (the NDK's linker) of the same shape.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rne_tools.binaries import shared_library
from rne_tools.binaries.sizes import LINKER, loaded_bytes, parse_link_map, shared_library_sizes

COMPONENTS = {"libkernels_blob.a": "kernels", "libvulkan_backend.a": "vulkan"}


def _archive(tmp_path: Path, name: str, members: dict[str, str]) -> Path:
    """A static archive of PIC objects compiled from ``members`` (object name -> C source)."""
    compiler = shutil.which("cc")
    assert compiler, "no C compiler (cc); scripts/setup.sh installs build-essential"
    objects = []
    for obj, source in members.items():
        src = tmp_path / obj.replace(".o", ".c")
        src.write_text(source)
        out = tmp_path / obj
        subprocess.run([compiler, "-c", "-fPIC", "-O1", "-ffunction-sections", "-fdata-sections", str(src), "-o", str(out)], check=True)
        objects.append(str(out))
    archive = tmp_path / name
    subprocess.run(["ar", "rcs", str(archive), *objects], check=True)
    return archive


def _link(tmp_path: Path, blob_bytes: int, spirv_bytes: int) -> tuple[Path, Path]:
    kernels = _archive(tmp_path, "libkernels_blob.a", {
        "kernel.o": f"const char rne_kernel_table[{blob_bytes}] = {{1}};\n"
                    "int rne_kernel(int i) { return rne_kernel_table[i]; }\n"})
    vulkan = _archive(tmp_path, "libvulkan_backend.a", {
        "spv.cpp.o": f"const unsigned rne_spirv[{spirv_bytes // 4}] = {{0x07230203u}};\n"
                     "const unsigned *rne_shaders(void) { return rne_spirv; }\n",
        "backend.o": "int rne_backend(void) { return 7; }\n"})
    so, link_map = tmp_path / "libexecutorch.so", tmp_path / "libexecutorch.map"
    subprocess.run(["cc", "-shared", "-o", str(so), f"-Wl,-Map={link_map}",
                    "-Wl,--whole-archive", str(kernels), str(vulkan), "-Wl,--no-whole-archive"],
                   check=True)
    return so, link_map


def test_gnu_ld_map_attributes_each_archive_and_the_spirv(tmp_path):
    so, link_map = _link(tmp_path, 96 * 1024, 48 * 1024)
    table = shared_library_sizes(so, link_map, COMPONENTS)
    assert 96 * 1024 <= table["kernels"]["loaded_bytes"] < 96 * 1024 + 1024
    assert 48 * 1024 <= table["vulkan_spirv"]["loaded_bytes"] < 48 * 1024 + 1024
    assert 0 < table["vulkan"]["loaded_bytes"] < 1024  # the backend's code, without its shaders
    assert table["total"]["loaded_bytes"] == loaded_bytes(so)
    assert sum(r["loaded_bytes"] for k, r in table.items() if k != "total") == loaded_bytes(so)
    assert 0 < table[LINKER]["loaded_bytes"] < 64 * 1024


def test_a_component_that_grows_is_seen_in_its_own_row(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    small = shared_library_sizes(*_link(tmp_path / "a", 16 * 1024, 8 * 1024), COMPONENTS)
    big = shared_library_sizes(*_link(tmp_path / "b", 16 * 1024, 40 * 1024), COMPONENTS)
    grown = big["vulkan_spirv"]["loaded_bytes"] - small["vulkan_spirv"]["loaded_bytes"]
    assert grown == 32 * 1024
    assert big["kernels"]["loaded_bytes"] == small["kernels"]["loaded_bytes"]


LLD_MAP = """\
             VMA              LMA     Size Align Out     In      Symbol
             2a8              2a8       24     8 .note.gnu.build-id
             2a8              2a8       24     1         <internal>:(.note.gnu.build-id)
            1000             1000     3000    16 .rodata
            1000             1000     2000    16         /b/backends/vulkan/libvulkan_backend.a(spv.cpp.o):(.rodata.rne_spirv)
            1000             1000        0     1                 rne_spirv
            3000             3000     1000    16         /b/kernels/libkernels_blob.a(kernel.o):(.rodata)
            5000             5000      100    16 .text
            5000             5000       40     4         /b/backends/vulkan/libvulkan_backend.a(backend.o):(.text.rne_backend)
            5040             5040       c0     4         /b/kernels/libkernels_blob.a(kernel.o):(.text)
            6000             6000       10     8 .bss
            6000             6000       10     8         /b/kernels/libkernels_blob.a(kernel.o):(.bss)
"""


def test_lld_map_rows():
    rows = parse_link_map(LLD_MAP)
    assert rows == [
        (".note.gnu.build-id", "", "<internal>", 0x24),
        (".rodata", "libvulkan_backend.a", "spv.cpp.o", 0x2000),
        (".rodata", "libkernels_blob.a", "kernel.o", 0x1000),
        (".text", "libvulkan_backend.a", "backend.o", 0x40),
        (".text", "libkernels_blob.a", "kernel.o", 0xC0),
        (".bss", "libkernels_blob.a", "kernel.o", 0x10),
    ]


def test_every_recipe_archive_has_a_component():
    names = shared_library.component_of_archive()
    for component, parts in shared_library.COMPONENTS.items():
        for archive in parts.whole + parts.linked:
            assert names[Path(archive).name] == component
    assert names["libkleidiai.a"] == "xnnpack"


def test_not_a_map_is_a_clear_error(tmp_path):
    from rne_tools.binaries.errors import ManifestError

    with pytest.raises(ManifestError, match="not a GNU ld or lld link map"):
        parse_link_map("hello\n")
    with pytest.raises(ManifestError, match="missing"):
        shared_library_sizes(tmp_path / "none.so", tmp_path / "none.map", COMPONENTS)

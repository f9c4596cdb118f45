"""Every shared object our recipes link has 16 KB-aligned loadable segments (Google Play's rule
for apps targeting Android 15+, whose devices may use 16 KB pages).

The host build's Node addon is always there when pytest runs (``make test`` builds it first); the
recipes' ``libexecutorch.so`` (linux with and without the GPU delegates, linux-arm64 from source,
and android where an NDK host staged it) are checked where they exist, and the source tests check the linux one again (test_native_packaging_so.py).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rne_tools.binaries.elf import PAGE_16K, ElfError, load_segment_alignments, misaligned_segments

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST_ADDON = REPO_ROOT / "build" / "host" / "node" / "rne_node.node"


def _recipe_outputs() -> list[Path]:
    found = [HOST_ADDON]
    found += sorted((REPO_ROOT / "build" / "linux-shared").glob("**/libexecutorch.so"))
    found += sorted((REPO_ROOT / "build" / "linux-arm64" / "node").glob("*.node"))  # docs/arm64.md
    found += sorted((REPO_ROOT / "build" / "linux-arm64-shared").glob("**/libexecutorch.so"))
    found += sorted((REPO_ROOT / "third-party" / "android").glob("*/libexecutorch.so"))
    return found


@pytest.mark.parametrize("path", _recipe_outputs(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_segments_are_16k_aligned(path: Path) -> None:
    if not path.is_file():
        pytest.fail(f"{path} is missing: build the host first "
                    "(`.venv/bin/python tools/build_binaries.py --platform host`)")
    alignments = load_segment_alignments(path)
    assert alignments, f"{path} has no loadable segment"
    assert not misaligned_segments(path), (
        f"{path}: PT_LOAD alignments {alignments}, Android 15+ needs >= {PAGE_16K}; link with "
        "-Wl,-z,max-page-size=16384")


def test_check_sees_4k_alignment(tmp_path: Path) -> None:
    """The same link without the flag is refused (x86-64's default page is 4 KB)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("no C compiler (cc) on PATH; scripts/setup.sh installs build-essential")
    source = tmp_path / "empty.c"
    source.write_text("int rne_probe(void) { return 1; }\n")
    plain, aligned = tmp_path / "plain.so", tmp_path / "aligned.so"
    subprocess.run([compiler, "-shared", "-fPIC", str(source), "-o", str(plain),
                    "-Wl,-z,max-page-size=4096"], check=True)
    subprocess.run([compiler, "-shared", "-fPIC", str(source), "-o", str(aligned),
                    "-Wl,-z,max-page-size=16384"], check=True)
    assert misaligned_segments(plain) and not misaligned_segments(aligned)


def test_refuses_what_is_not_elf64(tmp_path: Path) -> None:
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"not an elf")
    with pytest.raises(ElfError, match="not an ELF"):
        load_segment_alignments(junk)
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(HOST_ADDON.read_bytes()[:64] if HOST_ADDON.is_file() else b"\x7fELF\x02\x01" + bytes(58))
    with pytest.raises(ElfError):
        load_segment_alignments(truncated)

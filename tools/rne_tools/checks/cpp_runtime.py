"""Run a ``.pte`` through our C++ runner on the ExecuTorch runtime built from source.

``tools/build_binaries.py --platform linux`` builds ``build/linux/host/rne_logits``, which feeds
tokens through ``rne::runner::ModelSession`` (the runner's own forward path) in given chunk sizes
and writes the last-position logits of every forward call. That runtime has the MLX (CPU) and
Vulkan (lavapipe) delegates the pip wheel lacks, so this is how GPU exports are executed here.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rne_tools.backend_catalog import load_catalog
from rne_tools.errors import RneError
from rne_tools.paths import REPO_ROOT

RNE_LOGITS = REPO_ROOT / "build" / "linux" / "host" / "rne_logits"
MANIFEST = REPO_ROOT / "build" / "linux" / "manifest.json"
# Our backend names -> the ExecuTorch CMake switch that builds each delegate.
_BACKEND_FLAGS = {b.name: b.build_flag for b in load_catalog().backends}


class CppRuntimeError(RneError):
    """The source-built runner could not run a program (the message has its stderr)."""


def available() -> bool:
    """Whether the source-built runner exists (``build_binaries.py --platform linux`` ran)."""
    return RNE_LOGITS.is_file()


def has_backend(backend: str) -> bool:
    """Whether the source-built runner exists and its build has ``backend``'s delegate (read from
    the flags build/linux/manifest.json records)."""
    if not available() or not MANIFEST.is_file() or backend not in _BACKEND_FLAGS:
        return False
    manifest = json.loads(MANIFEST.read_text())
    flags = [f for build in manifest.get("builds", {}).values()
             for f in build.get("cmake_flags", {}).get("executorch", [])]
    return f"-D{_BACKEND_FLAGS[backend]}=ON" in flags


def forward_logits(pte: Path, tokens: Sequence[int], chunks: Sequence[int],
                   timeout_s: float = 600, binary: Path = RNE_LOGITS) -> np.ndarray:
    """Logits ``[len(chunks), vocab]`` of each forward call, feeding ``tokens`` in ``chunks``,
    from ``binary`` (default: the source-built runner; the host build has its own)."""
    if sum(chunks) != len(tokens):
        raise ValueError(f"chunks sum to {sum(chunks)}, tokens has {len(tokens)}")
    if not binary.is_file():
        hint = (": run `.venv/bin/python tools/build_binaries.py --platform linux`"
                if binary == RNE_LOGITS else "")
        raise CppRuntimeError(f"{binary} is missing{hint}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "logits.f32"
        proc = subprocess.run(
            [str(binary), "--model", str(pte), "--tokens", ",".join(map(str, tokens)),
             "--chunks", ",".join(map(str, chunks)), "--out", str(out)],
            capture_output=True, text=True, timeout=timeout_s,
        )
        if proc.returncode != 0:
            raise CppRuntimeError(f"rne_logits failed on {pte.name}: "
                                  f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
        return np.fromfile(out, dtype=np.float32).reshape(len(chunks), -1)

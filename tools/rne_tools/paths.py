"""Well-known locations inside the repository, and joining untrusted relative paths safely."""

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from rne_tools.errors import UnsafePathError

REPO_ROOT = Path(__file__).resolve().parents[2]
REGISTRY_DIR = REPO_ROOT / "model-registry"
PACKAGE_DIR = REPO_ROOT / "packages" / "react-native-executorch"
CACHE_DIR = REPO_ROOT / ".cache"


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """``$RNE_CACHE_DIR`` or ``~/.cache/rne``: the machine-wide cache, outside every checkout.

    Holds what is keyed by content and so can be shared by every clone on the machine (the
    ExecuTorch source and build, imported checkpoints, verified exports); resolved at run time,
    never stored in the repo. Per-checkout build trees stay under ``CACHE_DIR``.
    """
    env = os.environ if env is None else env
    return Path(env["RNE_CACHE_DIR"]) if env.get("RNE_CACHE_DIR") else Path.home() / ".cache" / "rne"


def contained_path(root: Path, relative: str, *, what: str) -> Path:
    """``root / relative``, for a ``relative`` that comes from the registry or a caller.

    Refuses (``UnsafePathError``, naming ``what``) anything that could leave ``root``: an empty,
    absolute or backslashed path, an empty, ``.`` or ``..`` segment, a NUL byte, and a path that
    resolves outside ``root`` through a symlink.
    """
    problem = _relative_path_problem(relative)
    if problem is None:
        joined = Path(root) / relative
        if not joined.resolve().is_relative_to(Path(root).resolve()):
            problem = f"resolves outside {root} (through a symlink)"
    if problem is not None:
        raise UnsafePathError(f"{what} {relative!r} {problem}; it must stay inside {root}")
    return joined


def _relative_path_problem(relative: str) -> str | None:
    if not isinstance(relative, str) or not relative:
        return "is empty"
    if "\0" in relative or "\\" in relative:
        return "contains a NUL byte or a backslash"
    if relative.startswith("/") or PurePosixPath(relative).is_absolute():
        return "is absolute"
    segments = relative.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return "has an empty, '.' or '..' segment"
    return None


def export_stem(model_id: str, backend: str, quantization: str) -> str:
    """File name stem of an exported variant, ``<model>_<backend>_<quant>``: what the exporter
    writes (``<stem>.pte``, ``<stem>.report.json``) and the publisher looks for."""
    return f"{model_id}_{backend}_{quantization}"

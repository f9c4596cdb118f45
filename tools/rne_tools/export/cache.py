"""Reuse exports: ``cached_export`` returns an earlier verified export with identical inputs.

The key covers the resolved export options, the weights (random config, or the checkpoint's
config and safetensors sizes/mtimes), the model and export code the export can run (syntax
trees, so comments and docstrings do not count; other architectures' and backends' files are
left out), and the torch/executorch/torchao versions, so any change that could alter the
program re-exports.
A file lock serialises concurrent callers (pytest and ctest may both ask for the same file).
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from rne_tools.export.pipeline import (
    ExportResult,
    export_llm,
    export_stem,
    resolve_options,
    resolve_source,
)
from rne_tools.models import ARCHITECTURES
from rne_tools.paths import cache_root

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_CODE = ("models", "export", "checkpoints.py", "gguf_import.py", "runtime")
# Under _CODE but only deciding what reaches the terminal, never what is exported.
_CONSOLE_ONLY = ("runtime/quiet.py", "runtime/native_stderr.py")


def _code_files(architecture: str, backend: str) -> list[Path]:
    """The code an export of ``architecture`` on ``backend`` can run: everything under ``_CODE``
    except the other architectures' model files and the other backends' modules, so editing
    one model or backend keeps every other export's cache."""
    files: list[Path] = []
    for entry in _CODE:
        path = _PACKAGE_ROOT / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]

    def used(file: Path) -> bool:
        if file.relative_to(_PACKAGE_ROOT).as_posix() in _CONSOLE_ONLY:
            return False
        folder = file.parent.relative_to(_PACKAGE_ROOT).as_posix()
        if folder == "models" and file.stem != "__init__":
            return ARCHITECTURES.get(architecture) == f"rne_tools.models.{file.stem}"
        if folder == "export/backends" and file.stem not in ("__init__", "gpu_checks"):
            return file.stem.split("_")[0] == backend
        return True

    return [f for f in files if used(f)]


def _code_fingerprint(architecture: str, backend: str) -> str:
    """Hash of the code's syntax trees without docstrings: edits to comments, docstrings or
    formatting keep the cache; any change to what the code does invalidates it."""
    h = hashlib.sha256()
    for file in _code_files(architecture, backend):
        tree = ast.parse(file.read_text())
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (
                isinstance(body, list)
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                body[0] = ast.Pass()
        h.update(str(file.relative_to(_PACKAGE_ROOT)).encode())
        h.update(ast.dump(tree).encode())
    return h.hexdigest()


def _source_fingerprint(
    checkpoint: Path | None, random_config: str | None, hf_config: dict[str, Any]
) -> dict[str, Any]:
    if checkpoint is None:
        return {"random_config": random_config, "config": hf_config}
    files = sorted(p for p in checkpoint.iterdir() if p.suffix in (".safetensors", ".json"))
    return {
        "checkpoint": str(checkpoint.resolve()),
        "files": [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files],
    }


def cache_key(**inputs: Any) -> str:
    """The cache key of an export with ``export_llm``'s keyword inputs."""
    options = resolve_options(
        inputs["model_id"],
        inputs["backend"],
        inputs.get("quantization"),
        inputs.get("max_context"),
        inputs.get("max_chunk"),
        inputs.get("embedding_quantization", "8w"),
        inputs.get("group_size", 32),
    )
    source = resolve_source(options, inputs.get("checkpoint"), inputs.get("random_config"))
    blob = json.dumps(
        {
            "options": options.__dict__,
            "source": _source_fingerprint(
                source.checkpoint, source.random_config, source.hf_config
            ),
            "code": _code_fingerprint(options.architecture, options.backend),
            "versions": {p: version(p) for p in ("torch", "executorch", "torchao")},
        },
        sort_keys=True,
    )
    return (
        f"{export_stem(inputs['model_id'], inputs['backend'], options.quantization)}-"
        + hashlib.sha256(blob.encode()).hexdigest()[:16]
    )


def _executable_now(report: dict[str, Any], backend: str) -> bool:
    """Whether an export verified while no runtime could run it (status ``unavailable``) can
    now be executed by the source-built runtime: then it is exported again and executed."""
    from rne_tools.export import cpp_runtime

    status = report.get("verification", {}).get("status")
    return status == "unavailable" and cpp_runtime.has_backend(backend)


def cached_export(
    model_id: str,
    backend: str,
    quantization: str | None = None,
    *,
    checkpoint: Path | str | None = None,
    random_config: str | dict[str, Any] | None = None,
    max_context: int | None = None,
    max_chunk: int | None = None,
    embedding_quantization: str = "8w",
    group_size: int = 32,
    cache_dir: Path | None = None,
    progress: bool = True,
) -> ExportResult:
    """``export_llm`` into ``<cache_dir>/exports/<key>/``, or the verified export already there.

    ``cache_dir`` defaults to the machine-wide cache: the key is content-based, so every
    checkout on the machine (a fresh CI clone included) reuses the same verified exports."""
    cache_dir = cache_root() if cache_dir is None else cache_dir
    inputs = {
        "model_id": model_id,
        "backend": backend,
        "quantization": quantization,
        "checkpoint": checkpoint,
        "random_config": random_config,
        "max_context": max_context,
        "max_chunk": max_chunk,
        "embedding_quantization": embedding_quantization,
        "group_size": group_size,
    }
    key = cache_key(**inputs)
    root = Path(cache_dir) / "exports"
    root.mkdir(parents=True, exist_ok=True)
    out = root / key
    with (root / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stem = key.rsplit("-", 1)[0]
        pte, report_path = out / f"{stem}.pte", out / f"{stem}.report.json"
        # export_llm renames both files into place only after a successful export.
        if pte.is_file() and report_path.is_file():
            report = json.loads(report_path.read_text())
            if not _executable_now(report, backend):
                return ExportResult(pte, report_path, report)
        inputs.pop("model_id"), inputs.pop("backend")
        return export_llm(model_id, backend, out, progress=progress, **inputs)

"""Reuse exports: ``cached_export`` returns an earlier verified export with identical inputs.

The key covers the plan's resolved options, the weights (random config, or the checkpoint's
config and safetensors sizes/mtimes), the model, export and check code the export can run
(syntax trees, so comments and docstrings do not count; other architectures' and backends' files
are left out), and the torch/executorch/torchao versions, so any change that could alter the
program or its verification verdict re-exports.
A file lock serialises concurrent callers (pytest and ctest may both ask for the same file).
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
from pathlib import Path
from typing import Any, Unpack

from rne_tools.checks import cpp_runtime
from rne_tools.export.backends import BACKEND_CODES, backend_names
from rne_tools.export.pipeline import ExportResult, run_export, versions
from rne_tools.export.plan import ExportPlan, ModelSource, RequestOptions, plan_export
from rne_tools.models import ARCHITECTURES
from rne_tools.paths import cache_root

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_CODE = ("models", "export", "checks", "checkpoints.py", "gguf_import.py", "runtime")
# Under _CODE but never deciding what is exported or its verdict: what reaches the terminal, and
# the checks that run on finished exports only.
_NOT_IN_EXPORT = (
    "runtime/quiet.py",
    "runtime/native_stderr.py",
    "checks/parity.py",
    "checks/quality.py",
)


def _code_files(architecture: str, backend: str) -> list[Path]:
    """The code an export of ``architecture`` on ``backend`` can run: everything under ``_CODE``
    except the other architectures' model files and the other backends' modules, so editing
    one model or backend keeps every other export's cache."""
    files: list[Path] = []
    for entry in _CODE:
        path = _PACKAGE_ROOT / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]

    def used(file: Path) -> bool:
        if file.relative_to(_PACKAGE_ROOT).as_posix() in _NOT_IN_EXPORT:
            return False
        folder = file.parent.relative_to(_PACKAGE_ROOT).as_posix()
        if folder == "models":
            module = f"rne_tools.models.{file.stem}"
            # Another architecture's file is left out; shared model code counts.
            return module not in ARCHITECTURES.values() or ARCHITECTURES[architecture] == module
        if folder == "export/backends":
            # backends/<name>.py and backends/<name>_*.py belong to backend <name>.
            owner = file.stem.split("_")[0]
            return owner not in backend_names() or owner == backend
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


def _source_fingerprint(source: ModelSource) -> dict[str, Any]:
    if source.checkpoint is None:
        return {"random_config": source.random_config, "config": source.hf_config}
    files = sorted(p for p in source.checkpoint.iterdir() if p.suffix in (".safetensors", ".json"))
    return {
        "checkpoint": str(source.checkpoint.resolve()),
        "files": [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files],
    }


def cache_key(plan: ExportPlan) -> str:
    """The cache key of an export of ``plan``."""
    blob = json.dumps(
        {
            "options": plan.options.__dict__,
            "source": _source_fingerprint(plan.source),
            "code": _code_fingerprint(plan.options.architecture, plan.options.backend),
            # Written into the program (get_backend), declared in model-registry/backends.yaml.
            "pte_code": BACKEND_CODES[plan.options.backend],
            "versions": versions(),
        },
        sort_keys=True,
    )
    return f"{plan.stem}-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def _executable_now(report: dict[str, Any], backend: str) -> bool:
    """Whether an export verified while no runtime could run it (status ``unavailable``) can
    now be executed by the source-built runtime: then it is exported again and executed."""
    status = report.get("verification", {}).get("status")
    return status == "unavailable" and cpp_runtime.has_backend(backend)


def cached_export(
    model_id: str,
    backend: str,
    quantization: str | None = None,
    *,
    cache_dir: Path | None = None,
    progress: bool = True,
    **request: Unpack[RequestOptions],
) -> ExportResult:
    """``run_cached_export`` of the request's ``plan_export``."""
    plan = plan_export(model_id, backend, quantization, **request)
    return run_cached_export(plan, cache_dir=cache_dir, progress=progress)


def run_cached_export(
    plan: ExportPlan, *, cache_dir: Path | None = None, progress: bool = True
) -> ExportResult:
    """``run_export`` into ``<cache_dir>/exports/<key>/``, or the verified export already there.

    ``cache_dir`` defaults to the machine-wide cache: the key is content-based, so every
    checkout on the machine (a fresh CI clone included) reuses the same verified exports."""
    cache_dir = cache_root() if cache_dir is None else cache_dir
    key = cache_key(plan)
    root = Path(cache_dir) / "exports"
    root.mkdir(parents=True, exist_ok=True)
    out = root / key
    with (root / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pte, report_path = out / f"{plan.stem}.pte", out / f"{plan.stem}.report.json"
        # run_export renames both files into place only after a successful export.
        if pte.is_file() and report_path.is_file():
            report = json.loads(report_path.read_text())
            if not _executable_now(report, plan.options.backend):
                return ExportResult(pte, report_path, report, plan)
        return run_export(plan, out, progress=progress)

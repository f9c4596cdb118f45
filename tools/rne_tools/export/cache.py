"""Reuse exports: ``run_cached_export`` returns an earlier verified export of the same program.

An export is stored under its **program key** (``program_key``): what determines the program it
produces, computed without lowering: the traced graph after the backend's transforms and
quantization, with every weight and constant (``fingerprint.graph_fingerprint``), the constant
methods it carries, the plan's options, how it is lowered (``lowering.lowering_fingerprint``:
the partitioners, passes and configs by their values, and ``lowering.lower``, the backend's
hooks and what they call by meaning, not by text) and the torch/executorch/torchao versions. So
a refactor of the model, transform, quantization or lowering code that leaves the graph and the
lowering's values alone re-exports nothing, and a change to a transform re-exports exactly the
exports whose graphs it changes.

Tracing costs seconds for the tiny models (loading, transforming and quantizing the weights), so
a **recipe key** (``recipe_key``: the plan, the weights' identity and the syntax trees of the code
an export runs) remembers which program key a request resolved to last time: an unchanged
request on an unchanged tree finds its export without tracing at all.

The verification verdict is kept with its own fingerprint (the verification code by meaning, and
whether the source-built runtime can execute the backend): when either changed, the cached
program is verified again against the freshly traced eager model, not exported again.
A file lock serialises concurrent callers (pytest and ctest may both ask for the same file).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Unpack

from rne_tools.checks import cpp_runtime
from rne_tools.checks.delegation import delegation_summary
from rne_tools.checks.verify import verify_program, with_verify_method_check
from rne_tools.errors import VerificationError
from rne_tools.export import pipeline
from rne_tools.export.backends import BACKEND_CODES, backend_names
from rne_tools.export.fingerprint import code_fingerprint, graph_fingerprint, syntax_fingerprint
from rne_tools.export.lowering import lowering_fingerprint
from rne_tools.export.pipeline import ExportResult, TracedExport, trace_export, versions
from rne_tools.export.plan import ExportPlan, ModelSource, RequestOptions, plan_export
from rne_tools.files import write_atomically
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


# The recipe key: a fast lookup of the program key an unchanged request resolved to.


def _code_files(architecture: str, backend: str) -> list[Path]:
    """The code an export of ``architecture`` on ``backend`` can run: everything under ``_CODE``
    except the other architectures' model files and the other backends' modules."""
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


def _source_fingerprint(source: ModelSource) -> dict[str, Any]:
    if source.checkpoint is None:
        return {"random_config": source.random_config, "config": source.hf_config}
    files = sorted(p for p in source.checkpoint.iterdir() if p.suffix in (".safetensors", ".json"))
    return {
        "checkpoint": str(source.checkpoint.resolve()),
        "files": [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files],
    }


def content_key(stem: str, fields: dict[str, Any]) -> str:
    """``<stem>-<hash>`` of ``fields`` (JSON values): the form of every key of the export cache,
    the text models' and the encoders' (``rne_tools.encoders.export``)."""
    blob = json.dumps(fields, sort_keys=True)
    return f"{stem}-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def recipe_key(plan: ExportPlan) -> str:
    """The recipe key of ``plan``: its options, weights, code text and versions."""
    return content_key(plan.stem, {
        "options": plan.options.key_fields(),
        "source": _source_fingerprint(plan.source),
        "code": syntax_fingerprint(
            _code_files(plan.options.architecture, plan.options.backend), _PACKAGE_ROOT
        ),
        # Written into the program (get_backend), declared in model-registry/backends.yaml.
        "pte_code": BACKEND_CODES[plan.options.backend],
        "versions": versions(),
    })


# The program key: what the program is.


def plan_lowering_fingerprint(plan: ExportPlan) -> str:
    """How ``plan``'s program is lowered and reported (``lowering.lowering_fingerprint``): the
    lowering's values, and by meaning the backend's hooks (which may patch the library they
    configure) and the report's code."""
    backend = plan.backend
    return lowering_fingerprint(
        pipeline.plan_lowering(plan),
        delegation_summary,
        backend.transform_passes,
        backend.partitioners,
        backend.compile_config,
        backend.inspect,
    )


def check_fingerprint(plan: ExportPlan) -> str:
    """What the verification verdict depends on besides the program: the verification code and
    whether the source-built runtime can execute the backend."""
    runtime = cpp_runtime.has_backend(plan.options.backend)
    checks = (verify_program, with_verify_method_check) if plan.options.verify_tokens else (
        verify_program,)
    if plan.options.assistant_digest:
        checks += (pipeline.with_draft_method_check,)
    return code_fingerprint(*checks) + f"-runtime={int(runtime)}"


def program_key(traced: TracedExport) -> str:
    """``<stem>-<hash>`` of what determines ``traced``'s program (see the module docstring)."""
    plan = traced.plan
    return content_key(plan.stem, {
        "options": plan.options.key_fields(),
        "graph": graph_fingerprint(traced.exported),
        **(
            {"verify_graph": graph_fingerprint(traced.verify_exported)}
            if traced.verify_exported is not None else {}
        ),
        **(
            {"draft_graph": graph_fingerprint(traced.draft_exported)}
            if traced.draft_exported is not None else {}
        ),
        "constants": traced.constants,
        "lowering": plan_lowering_fingerprint(plan),
        "versions": versions(),
    })


# The cache


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on the file ``path`` while the block runs: concurrent callers (pytest
    and ctest) wait for one export instead of making it twice."""
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _stored(out: Path, plan: ExportPlan) -> ExportResult | None:
    pte, report = out / f"{plan.stem}.pte", out / f"{plan.stem}.report.json"
    if pte.is_file() and report.is_file():
        return ExportResult(pte, report, json.loads(report.read_text()), plan)
    return None


def find_cached_export(plan: ExportPlan, *, cache_dir: Path | None = None) -> ExportResult | None:
    """The export an unchanged ``plan`` resolved to before, without tracing; None if none."""
    root = (cache_root() if cache_dir is None else Path(cache_dir)) / "exports"
    return _found(root, root / "recipes" / recipe_key(plan), plan, check_fingerprint(plan))


def _found(root: Path, recipe: Path, plan: ExportPlan, checks: str) -> ExportResult | None:
    """The export ``recipe`` names, if it is stored and verified under ``checks``."""
    if not recipe.is_file():
        return None
    stored = _stored(root / recipe.read_text().strip(), plan)
    if stored is None or stored.report.get("check_fingerprint") != checks:
        return None
    return stored


def _reverify(stored: ExportResult, traced: TracedExport, checks: str) -> ExportResult:
    """Verify a cached program again under the current checks; rewrite its report."""
    verification = verify_program(stored.pte_path, traced.model, traced.plan)
    if traced.plan.options.verify_tokens:
        verification = with_verify_method_check(
            verification, stored.pte_path, traced.model, traced.plan)
    if traced.assistant is not None:
        verification = pipeline.with_draft_method_check(
            verification, stored.pte_path, traced.model, traced.assistant, traced.plan)
    if verification["status"] == "mismatch":
        raise VerificationError(
            f"{stored.pte_path.name} does not compute what the eager model computes under the "
            f"current checks: {verification.get('error')}."
        )
    report = {**stored.report, "verification": verification, "check_fingerprint": checks}
    write_atomically(stored.report_path, json.dumps(report, indent=2) + "\n")
    return ExportResult(stored.pte_path, stored.report_path, report, traced.plan)


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
    """The verified export of ``plan`` from ``<cache_dir>/exports/<program key>/``, made there
    first if no export of the same program exists.

    ``cache_dir`` defaults to the machine-wide cache: the keys are content-based, so every
    checkout on the machine (a fresh CI clone included) reuses the same verified exports."""
    root = (cache_root() if cache_dir is None else Path(cache_dir)) / "exports"
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    recipe = root / "recipes" / recipe_key(plan)
    checks = check_fingerprint(plan)
    with locked(root / "recipes" / f".{recipe.name}.lock"):
        found = _found(root, recipe, plan, checks)
        if found is not None:
            return found
        traced = trace_export(plan, progress=progress)
        key = program_key(traced)
        with locked(root / f"{key}.lock"):
            stored = _stored(root / key, plan)
            if stored is None:
                stored = pipeline.finish_export(
                    traced, root / key, progress=progress,
                    report_extra={"program_key": key, "check_fingerprint": checks},
                )
            elif stored.report.get("check_fingerprint") != checks:
                stored = _reverify(stored, traced, checks)
        write_atomically(recipe, key + "\n")
        return ExportResult(stored.pte_path, stored.report_path, stored.report, plan)

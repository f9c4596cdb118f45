"""Read the exporter's outputs: ``<model>_<backend>_<quant>.pte`` and its ``.report.json``.

Publishing trusts nothing it cannot re-check: the report must describe this model, backend and
quantization, the ``.pte`` on disk must still have the sha256 and size the report recorded, the
export shape must match the registry, and the verification must have passed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rne_tools.hashing import sha256_file
from rne_tools.paths import contained_path, export_stem
from rne_tools.publish.errors import PublishError
from rne_tools.registry import ModelSpec, VariantSpec


@dataclass(frozen=True)
class ExportArtifact:
    """A verified export of one variant, ready to upload."""

    model_id: str
    backend: str
    quantization: str
    pte: Path
    report_path: Path
    sha256: str
    size: int
    max_context: int
    max_chunk: int
    verification: str  # one-line summary for the model card


def _export_command(spec: ModelSpec, variant: VariantSpec, exports_dir: Path) -> str:
    return (
        f".venv/bin/python tools/export_model.py --model {spec.id} --backend {variant.backend} "
        f"--out {exports_dir}"
    )


def _field(report: dict[str, Any], dotted: str, where: Path) -> Any:
    value: Any = report
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise PublishError(f"{where}: missing field '{dotted}'; is this an export report?")
        value = value[key]
    return value


def verification_summary(verification: dict[str, Any]) -> str:
    """One line for the model card: how the program was checked against the eager model."""
    if "matching_tokens" in verification and "generated_tokens" in verification:
        line = (
            f"passed: {verification['matching_tokens']}/{verification['generated_tokens']} greedy "
            "tokens match eager PyTorch"
        )
        if "max_abs_logit_diff" in verification:
            line += f", max |logit diff| {verification['max_abs_logit_diff']:.3g}"
        return line
    return "passed"


def read_export(
    spec: ModelSpec, variant: VariantSpec, exports_dir: Path, allow_random_weights: bool = False
) -> ExportArtifact:
    """The checked export of ``variant`` in ``exports_dir``; ``PublishError`` says what is wrong.

    Exports of a random-weight test config are refused unless ``allow_random_weights`` (used to
    exercise publishing against a test server, never for a release).
    """
    exports_dir = Path(exports_dir)
    stem = export_stem(spec.id, variant.backend, variant.quantization)
    pte = contained_path(exports_dir, f"{stem}.pte", what="export file")
    report_path = contained_path(exports_dir, f"{stem}.report.json", what="export report")
    for path in (pte, report_path):
        if not path.is_file():
            raise PublishError(
                f"{path} not found: export the {variant.backend} variant first with "
                f"{_export_command(spec, variant, exports_dir)}"
            )
    try:
        report = json.loads(report_path.read_text())
    except json.JSONDecodeError as exc:
        raise PublishError(f"{report_path} is not valid JSON: {exc}") from exc

    expected = {
        "model": spec.id,
        "backend": variant.backend,
        "quantization": variant.quantization,
        "max_context": variant.max_context,
        "max_chunk": variant.max_chunk,
        "file": pte.name,
    }
    for key, want in expected.items():
        got = _field(report, key, report_path)
        if got != want:
            raise PublishError(
                f"{report_path}: {key} is {got!r} but the registry's {spec.id}/{variant.backend} "
                f"variant needs {want!r}; re-export with {_export_command(spec, variant, exports_dir)}"
            )

    if report.get("random_config") and not allow_random_weights:
        raise PublishError(
            f"refusing to publish {pte.name}: it was exported from the random-weight test config "
            f"{report['random_config']!r}, not from a checkpoint"
        )
    verification = _field(report, "verification", report_path)
    if not isinstance(verification, dict) or verification.get("passed") is not True:
        status = verification.get("status") if isinstance(verification, dict) else verification
        detail = (
            verification.get("error") or verification.get("reason")
            if isinstance(verification, dict)
            else None
        )
        raise PublishError(
            f"refusing to publish {pte.name}: its export report {report_path} does not show a "
            f"passed verification (status: {status}{f'; {detail}' if detail else ''}). Fix the "
            f"export and re-run {_export_command(spec, variant, exports_dir)}"
        )

    size = pte.stat().st_size
    sha256 = sha256_file(pte)
    if (sha256, size) != (report.get("sha256"), report.get("size")):
        raise PublishError(
            f"{pte} changed after it was exported and verified (sha256 {sha256}, {size} bytes; "
            f"report says {report.get('sha256')}, {report.get('size')} bytes); re-export it"
        )
    return ExportArtifact(
        model_id=spec.id,
        backend=variant.backend,
        quantization=variant.quantization,
        pte=pte,
        report_path=report_path,
        sha256=sha256,
        size=size,
        max_context=variant.max_context,
        max_chunk=variant.max_chunk,
        verification=verification_summary(verification),
    )

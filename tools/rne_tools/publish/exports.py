"""Read the exporters' outputs: ``<model>_<backend>_<quant>.pte`` and its ``.report.json``, and
the encoder programs of ``tools/export_encoder.py`` with theirs.

Publishing trusts nothing it cannot re-check: the report must describe this model, backend and
quantization, the ``.pte`` on disk must still have the sha256 and size the report recorded, the
export shape must match the registry, and the verification must have passed. An encoder's report
must name the encoder's methods and a passed parity check, and its embeddings must be as wide as
the text variant's (``text_width``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from rne_tools.hashing import sha256_file
from rne_tools.paths import contained_path, export_stem
from rne_tools.publish.errors import PublishError
from rne_tools.registry import ModelSpec, VariantSpec

# The methods an encoder program of each media capability exports (rne_tools.encoders).
ENCODER_METHODS = {"vision": ("vision_encoder",), "audio": ("speech_transform", "audio_encoder")}


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
    # Where the weights came from (the report's fields): a random config name, or a checkpoint.
    random_config: str | None = None
    checkpoint: str | None = None


@dataclass(frozen=True)
class EncoderArtifact:
    """A verified encoder program, ready to upload to its registry ``path``."""

    kind: str  # a media capability: "vision" or "audio"
    path: str  # repository path (the registry's encoders.<kind>.path)
    pte: Path
    report_path: Path
    sha256: str
    size: int
    text_hidden: int  # width of the embeddings it hands the text decoder
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


def _require_passed(verification: Any, pte: Path, report_path: Path, command: str) -> None:
    if isinstance(verification, dict) and verification.get("passed") is True:
        return
    status = verification.get("status") if isinstance(verification, dict) else verification
    detail = (
        verification.get("error") or verification.get("reason")
        if isinstance(verification, dict)
        else None
    )
    raise PublishError(
        f"refusing to publish {pte.name}: its export report {report_path} does not show a "
        f"passed verification (status: {status}{f'; {detail}' if detail else ''}). Fix the "
        f"export and re-run {command}"
    )


def _unchanged(pte: Path, report: dict[str, Any]) -> tuple[str, int]:
    """The sha256 and size of ``pte``, which must still be those its report recorded."""
    size = pte.stat().st_size
    sha256 = sha256_file(pte)
    if (sha256, size) != (report.get("sha256"), report.get("size")):
        raise PublishError(
            f"{pte} changed after it was exported and verified (sha256 {sha256}, {size} bytes; "
            f"report says {report.get('sha256')}, {report.get('size')} bytes); re-export it"
        )
    return sha256, size


def _read_report(report_path: Path) -> dict[str, Any]:
    try:
        report = json.loads(report_path.read_text())
    except json.JSONDecodeError as exc:
        raise PublishError(f"{report_path} is not valid JSON: {exc}") from exc
    if not isinstance(report, dict):
        raise PublishError(f"{report_path} is not an export report (not a JSON object)")
    return report


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
    report = _read_report(report_path)

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
    _require_passed(verification, pte, report_path, _export_command(spec, variant, exports_dir))
    sha256, size = _unchanged(pte, report)
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
        random_config=report.get("random_config"),
        checkpoint=report.get("checkpoint"),
    )


@dataclass(frozen=True)
class AssistantArtifact:
    """A verified export of a variant with the assistant drafter, ready to upload to its
    registry ``path`` (``variants.<backend>.assistant.path``)."""

    backend: str
    path: str
    export: ExportArtifact
    verify_tokens: int
    source_repo: str  # the registry's assistant checkpoint repository, for the model card
    draft_check: str  # one line for the model card: the draft method against the eager assistant

    @property
    def sha256(self) -> str:
        return self.export.sha256

    @property
    def size(self) -> int:
        return self.export.size


def _weights(export: ExportArtifact) -> str:
    if export.random_config:
        return f"the random config {export.random_config!r}"
    return str(export.checkpoint)


def _assistant_command(spec: ModelSpec, variant: VariantSpec, assistant_dir: Path) -> str:
    a = variant.assistant
    assert a is not None
    return (
        f".venv/bin/python tools/export_model.py --model {spec.id} --backend {variant.backend} "
        f"--assistant ASSISTANT_CHECKPOINT_DIR (from {a.hf_repo}) --verify-tokens "
        f"{a.verify_tokens} --out {assistant_dir}"
    )


def check_plain_export(export: ExportArtifact) -> None:
    """A variant's own program must be the one without the drafter: the heavier program with
    ``draft`` and ``verify`` is published as its assistant, for apps that ask for it."""
    if _read_report(export.report_path).get("assistant"):
        raise PublishError(
            f"{export.pte.name} in {export.pte.parent} was exported with --assistant "
            f"({export.report_path.name}); the {export.backend} variant's own program is the "
            "export without it (every app downloads that one). Export it without --assistant, "
            "and put the export with --assistant in --assistant-exports-dir"
        )


def read_assistant(
    spec: ModelSpec,
    variant: VariantSpec,
    assistant_dir: Path,
    plain: ExportArtifact,
    allow_random_weights: bool = False,
) -> AssistantArtifact:
    """The checked export of ``variant`` with its assistant drafter in ``assistant_dir`` (the
    exporter names it as the plain export, so it has a folder of its own): the registry's
    variant shape, the registry's ``verify_tokens``, a draft method verified against the eager
    assistant, and the same target weights as the plain export ``plain``."""
    declared = variant.assistant
    assert declared is not None
    command = _assistant_command(spec, variant, assistant_dir)
    stem = export_stem(spec.id, variant.backend, variant.quantization)
    if not (Path(assistant_dir) / f"{stem}.pte").is_file():
        raise PublishError(
            f"the {variant.backend} variant of {spec.id} declares an assistant "
            f"({declared.file.path}), but {assistant_dir} has no {stem}.pte: export it with {command}"
        )
    export = read_export(spec, variant, assistant_dir, allow_random_weights)
    report = _read_report(export.report_path)
    if not isinstance(report.get("assistant"), dict):
        raise PublishError(
            f"{export.pte} has no draft method (its report {export.report_path.name} records no "
            f"assistant): it is not the assistant's program; export it with {command}"
        )
    if report.get("verify_tokens") != declared.verify_tokens:
        raise PublishError(
            f"{export.report_path}: verify_tokens is {report.get('verify_tokens')!r} but the "
            f"registry's {spec.id}/{variant.backend} assistant needs {declared.verify_tokens}; "
            f"re-export with {command}"
        )
    draft = report["verification"].get("draft_method")
    if not isinstance(draft, dict) or draft.get("status") != "passed":
        raise PublishError(
            f"refusing to publish {export.pte.name} as the assistant of {spec.id}/"
            f"{variant.backend}: its report {export.report_path} does not show a passed check of "
            f"the draft method against the eager assistant; re-export with {command}"
        )
    if (export.random_config, export.checkpoint) != (plain.random_config, plain.checkpoint):
        raise PublishError(
            f"{export.pte} was exported from {_weights(export)}, but the {variant.backend} "
            f"variant's program {plain.pte} from {_weights(plain)}: the assistant drafts for the "
            "weights it was exported with; export both from the same checkpoint"
        )
    steps = draft.get("steps")
    return AssistantArtifact(
        backend=variant.backend,
        path=declared.file.path,
        export=export,
        verify_tokens=declared.verify_tokens,
        source_repo=declared.hf_repo,
        draft_check=f"{export.verification}; draft: {steps} greedy steps match the eager assistant",
    )


def _encoder_command(kind: str, exports_dir: Path) -> str:
    return f".venv/bin/python tools/export_encoder.py --encoder {kind} --output-dir {exports_dir}"


def encoder_verification_summary(verification: dict[str, Any]) -> str:
    """One line for the model card: the encoder's parity against transformers' eager model."""
    line = "passed"
    if "max_abs_diff" in verification:
        line += f": max |diff| {verification['max_abs_diff']:.3g} against eager transformers"
        if "relative" in verification:
            line += f" ({verification['relative']:.2g} x the embeddings' std)"
    if "feature_max_abs_diff" in verification:
        line += f", features max |diff| {verification['feature_max_abs_diff']:.3g}"
    return line


def find_encoder(exports_dir: Path, path: str, what: str, command: str) -> Path:
    """The export of the encoder at registry ``path`` in ``exports_dir``: ``<stem>.pte``, or
    ``<stem>_<budget>.pte`` as the encoder exporter names it (``_280`` soft tokens, ``_30s``)."""
    stem = PurePosixPath(path).stem
    name = re.compile(re.escape(stem) + r"(_[0-9]+s?)?\.pte")
    found = (
        sorted(p for p in exports_dir.iterdir() if name.fullmatch(p.name) and p.is_file())
        if exports_dir.is_dir()
        else []
    )
    if not found:
        raise PublishError(
            f"{what} ({path}) is not in {exports_dir}: it needs {stem}.pte, or {stem}_<budget>.pte "
            f"as tools/export_encoder.py names it, with its .report.json beside it. Export it with "
            f"{command}"
        )
    if len(found) > 1:
        raise PublishError(
            f"{what} ({path}) is ambiguous: {exports_dir} holds {', '.join(p.name for p in found)}; "
            "keep only the one to publish there"
        )
    return found[0]


def read_encoder(
    spec: ModelSpec,
    kind: str,
    path: str,
    exports_dir: Path,
    allow_random_weights: bool = False,
) -> EncoderArtifact:
    """The checked export of the ``kind`` encoder published at registry ``path``.

    ``PublishError`` when it is missing or ambiguous, its report is not the ``kind`` encoder's,
    its parity verification did not pass, the program changed since, or it was exported from a
    random-weight config (unless ``allow_random_weights``).
    """
    exports_dir = Path(exports_dir)
    what = f"the {kind} encoder of {spec.id}"
    command = _encoder_command(kind, exports_dir)
    pte = find_encoder(exports_dir, path, what, command)
    report_path = pte.with_name(f"{pte.stem}.report.json")
    if not report_path.is_file():
        raise PublishError(
            f"{report_path} not found: {pte.name} needs the report its export wrote beside it "
            f"(its verification); export it again with {command}"
        )
    report = _read_report(report_path)
    methods = report.get("methods", [report.get("method")])
    wanted = ENCODER_METHODS[kind]
    if not isinstance(methods, list) or not set(wanted) <= set(methods):
        raise PublishError(
            f"{report_path}: the program's methods are {methods!r}, but {what} needs "
            f"{', '.join(wanted)}; is {pte.name} the {kind} encoder? Export it with {command}"
        )
    if report.get("file") != pte.name:
        raise PublishError(
            f"{report_path}: file is {report.get('file')!r}, not {pte.name!r}: the report "
            "describes another program; keep each program with its own report"
        )
    if report.get("random_config") and not allow_random_weights:
        raise PublishError(
            f"refusing to publish {pte.name}: it was exported from the random-weight test config "
            f"{report.get('model')!r}, not from a checkpoint"
        )
    verification = _field(report, "verification", report_path)
    _require_passed(verification, pte, report_path, command)
    text_hidden = _field(report, "text_hidden", report_path)
    if not _is_width(text_hidden):
        raise PublishError(f"{report_path}: text_hidden is {text_hidden!r}, not a width")
    sha256, size = _unchanged(pte, report)
    return EncoderArtifact(
        kind=kind,
        path=path,
        pte=pte,
        report_path=report_path,
        sha256=sha256,
        size=size,
        text_hidden=text_hidden,
        verification=encoder_verification_summary(verification),
    )


def _is_width(value: Any) -> bool:
    """A positive integer (JSON's true is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _hidden_size(config: Any, where: str) -> int:
    text = config.get("text_config") if isinstance(config, dict) else None
    hidden = (text if isinstance(text, dict) else config or {}).get("hidden_size")
    if not _is_width(hidden):
        raise PublishError(
            f"{where}: no hidden_size (text_config.hidden_size) to check encoders with"
        )
    return hidden


def text_width(spec: ModelSpec, export: ExportArtifact, checkpoint_dir: Path) -> int:
    """Width of the embeddings the text variant of ``export`` takes (its ``hidden_size``), from
    what its report says it was exported from: a named random config of the architecture, or
    a checkpoint's ``config.json`` (the report's checkpoint where it is on this machine, else
    ``checkpoint_dir``, the checkpoint directory the variants were exported from)."""
    if export.random_config is not None:
        from rne_tools.models import get_architecture

        configs = get_architecture(spec.architecture).RANDOM_CONFIGS
        if export.random_config not in configs:
            raise PublishError(
                f"{export.report_path}: random_config {export.random_config!r} is not a named "
                f"{spec.architecture} config ({', '.join(sorted(configs))}), so the width its "
                "encoders must have is unknown; export the text variant from a named config or a "
                "checkpoint"
            )
        return _hidden_size(configs[export.random_config], f"random config {export.random_config}")
    dirs = [Path(export.checkpoint)] if export.checkpoint else []
    for config in [d / "config.json" for d in [*dirs, Path(checkpoint_dir)]]:
        if config.is_file():
            try:
                return _hidden_size(json.loads(config.read_text()), str(config))
            except json.JSONDecodeError as exc:
                raise PublishError(f"{config} is not valid JSON: {exc}") from exc
    raise PublishError(
        f"cannot tell how wide {export.pte.name}'s embeddings are, to check its encoders: "
        f"neither its report's checkpoint ({export.checkpoint}) nor {checkpoint_dir} has a "
        "config.json; pass --tokenizer-dir, the checkpoint directory it was exported from"
    )

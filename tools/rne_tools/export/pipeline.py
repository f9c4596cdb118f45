"""Export pipeline: checkpoint -> model -> backend transforms/quantization -> .pte + report.

``run_export`` takes a resolved ``ExportPlan`` (``plan.plan_export`` validates everything it
can before any weights load), writes the program and its report under temporary names,
verifies the program against the eager model (``rne_tools.checks.verify``), and only then
renames both into place. A failed verification removes the temporary files and raises
``VerificationError``. ``export_llm`` is the same from a request's keyword arguments.

The program follows the .pte contract of ``docs/design.md``: ``forward(tokens[1, T],
input_pos[1]) -> logits[1, vocab]`` with dynamic ``1 <= T <= max_chunk``, and constant methods
``get_max_seq_len`` (= max_chunk), ``get_max_context_len``, ``get_vocab_size``, ``get_bos_id``
(-1 when the model has none; chat templates add their own start tokens, so runners use it
only for raw prompts), ``get_eos_ids`` (list), ``use_kv_cache``, ``enable_dynamic_shape`` and
``get_backend`` (``backends.BACKEND_CODES``: 1 xnnpack, 2 vulkan, 3 mlx) and ``get_kv_ring_size``
(the smallest ring-buffer cache in slots, 0 when every cache is flat: how far back the runner
may rewind a cache for prompt-prefix reuse). With ``verify_tokens`` the program also has
``verify(tokens[1, T], input_pos[1]) -> logits[1, T, vocab]`` (``1 <= T <= verify_tokens``,
every position's logits, for speculative decoding) over the same KV caches, and the constant
method ``get_max_verify_len``. With an assistant (``export.assistant``) forward and verify also
return the normed hidden states of those positions, and a ``draft`` method runs the assistant
over the same caches (constant ``get_assistant_target``).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import resource
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Unpack

import torch
from torch import nn
from tqdm import tqdm

from rne_tools.checks.delegation import delegation_summary
from rne_tools.checks.verify import verify_program, with_verify_method_check
from rne_tools.errors import VerificationError
from rne_tools.export.backends import BACKEND_CODES
from rne_tools.export.lowering import Lowering, lower
from rne_tools.export.plan import ExportPlan, RequestOptions, plan_export
from rne_tools.export.quantize import spell_out_lookup_dtypes
from rne_tools.hashing import sha256_file
from rne_tools.models.gemma4_assistant import load_assistant, returning_hidden
from rne_tools.models.layers import reset_caches, returning_every_position


@dataclass(frozen=True)
class ExportResult:
    pte_path: Path
    report_path: Path
    report: dict[str, Any]
    # The plan the program was exported (or, for a cached export, would be exported) from.
    plan: ExportPlan


@contextlib.contextmanager
def stage(bar: tqdm, name: str, timings: dict[str, float]) -> Iterator[None]:
    """One step of a long export: its name on the progress bar, its seconds in ``timings``."""
    bar.set_description(name)
    start = time.perf_counter()
    yield
    timings[name] = round(time.perf_counter() - start, 3)
    bar.update(1)


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    scale = 1 if platform.system() == "Darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _kv_cache_dtype(model: nn.Module) -> str | None:
    """The dtype the program keeps its KV caches in (``float16``, ``float32``...), None if none."""
    names = {"k_cache", "v_cache", "k", "v"}
    dtypes = sorted({str(b.dtype).removeprefix("torch.") for n, b in model.named_buffers()
                     if n.rsplit(".", 1)[-1] in names})
    return ", ".join(dtypes) or None


def trace(model: nn.Module, plan: ExportPlan, chunk: int | None = None) -> Any:
    """torch.export of the transformed, quantized model with dynamic ``1 <= T <= chunk``
    (default: the plan's max chunk): the graph that is lowered, and what the export cache keys a
    program by."""
    from torch.export import Dim, export

    chunk = chunk or plan.options.max_chunk
    example: tuple[torch.Tensor, ...] = (torch.zeros(1, chunk, dtype=torch.long), torch.tensor([0]))
    # A dynamic dim needs a range; with max_chunk == 1 the shape is simply static.
    seq = {1: Dim("T", min=1, max=chunk)} if chunk > 1 else None
    dynamic: tuple[Any, ...] | None = (seq, None) if seq else None
    # A decoder with media tokens also takes the encoders' rows for the chunk's positions.
    width = getattr(model, "embeds_width", 0)
    if width:
        example += (torch.zeros(1, chunk, width),)
        dynamic = (seq, None, seq) if seq else None
    # The caches' contents now become the program's initial state: a delegate that owns its
    # caches (Vulkan) stores them in the file. Eager calls before (the vocabulary probe, checks)
    # wrote into them; zeroed, a file starts empty, is reproducible, and equal caches share bytes.
    reset_caches(model)
    with torch.no_grad():
        return export(model, example, dynamic_shapes=dynamic, strict=False)


def plan_lowering(plan: ExportPlan) -> Lowering:
    """How ``plan``'s traced methods become its program: the backend's partitioners and passes,
    and one memory plan. With ``verify`` (and ``draft``) the methods run over one set of KV
    caches, planned once in a buffer they share (the runner loads them with shared arenas)."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

    options, backend = plan.options, plan.backend
    return Lowering(
        partitioners=backend.partitioners(options),
        compile_config=backend.compile_config(),
        # Backend graph passes run before partitioning (e.g. MLX's fusions and reinplacing).
        transform_passes=backend.transform_passes(options),
        edge_passes=(spell_out_lookup_dtypes,),
        emit_config=ExecutorchBackendConfig(
            extract_delegate_segments=True,
            # Names the mutable buffers (the KV caches), so the runner can find the ring caches
            # it checkpoints at turn boundaries (Method::get_attribute).
            emit_mutable_buffer_names=True,
            # Fuses torchao's dequantize + embedding into the quantized embedding kernels.
            do_quant_fusion_and_const_prop=True,
            memory_planning_pass=MemoryPlanningPass(
                alloc_graph_input=False, share_mutable_buffers=bool(options.verify_tokens)
            ),
            sym_shape_eval_pass=ConstraintBasedSymShapeEvalPass(),
        ),
    )


def with_draft_method_check(
    verification: dict[str, Any], pte_path: Path, model: nn.Module, assistant: nn.Module,
    plan: ExportPlan,
) -> dict[str, Any]:
    """``verification`` with the ``draft`` method's check (``export.assistant.draft_check``)
    added as ``draft_method``; a mismatch turns the whole verification into one."""
    if verification.get("status") != "passed":
        return {**verification, "draft_method": {"status": "not run",
                                                 "reason": "needs the Python runtime"}}
    from rne_tools.checks.verify import verification_prompt
    from rne_tools.export.assistant import draft_check

    prompt, _ = verification_prompt(plan, assistant.args.vocab_size, 8)
    check = draft_check(pte_path, model, assistant, prompt, plan.options.max_chunk)
    if check["status"] != "passed":
        return {**verification, "passed": False, "status": "mismatch",
                "error": f"the draft method's tokens {check['runtime_tokens']} differ from the "
                         f"eager assistant's {check['expected_tokens']}",
                "draft_method": check}
    return {**verification, "draft_method": check}


def versions() -> dict[str, str]:
    """The versions of the packages that produce the program (also part of the cache key)."""
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "executorch", "torchao")}


def export_llm(
    model_id: str,
    backend: str,
    output_dir: Path | str,
    quantization: str | None = None,
    *,
    verify: bool = True,
    progress: bool = True,
    **request: Unpack[RequestOptions],
) -> ExportResult:
    """Export ``model_id`` for ``backend`` into ``output_dir``: ``run_export`` of the request's
    ``plan_export`` (see there for the defaults and the errors raised on bad input)."""
    plan = plan_export(model_id, backend, quantization, **request)
    return run_export(plan, output_dir, verify=verify, progress=progress)


@dataclass
class TracedExport:
    """A plan's model after the backend's transforms and quantization, and its trace: what the
    program is lowered from and what the export cache keys it by (``cache.program_key``)."""

    plan: ExportPlan
    model: nn.Module
    exported: Any  # torch.export.ExportedProgram
    # The ``verify`` method's trace (every position's logits), when the plan asks for one.
    verify_exported: Any | None
    # The constant methods the program carries (the .pte contract's metadata).
    constants: dict[str, Any]
    # The transform's own eager check (GPU backends), for the report.
    check: dict[str, Any] | None
    timings: dict[str, float]
    started: float
    # The ``draft`` method's trace and its eager assistant, when the plan has an assistant.
    draft_exported: Any | None = None
    assistant: nn.Module | None = None


def trace_export(plan: ExportPlan, *, verify: bool = True, progress: bool = True) -> TracedExport:
    """Load ``plan``'s weights, apply the backend's transforms and quantization, and trace.
    Raises ``VerificationError`` when a backend's transform check fails (with ``verify``)."""
    started = time.perf_counter()
    options, backend = plan.options, plan.backend
    bos_id, eos_ids = plan.special_token_ids()
    timings: dict[str, float] = {}
    with tqdm(total=4, disable=not progress, desc="trace") as bar:
        with stage(bar, "load", timings):
            model = plan.load_model()
        # Ring-buffer caches (sliding layers) can be rewound only while they never wrapped:
        # the runner reads the smallest ring (0: every cache is flat) to know how far.
        rings = [m.size for m in model.modules() if getattr(m, "ring", False)]
        with stage(bar, "transform+quantize", timings):
            transformed = backend.transform(model, options)
            # GPU backends rewrite the model and check the rewrite on an eager probe.
            check = transformed.check
            if verify and check is not None and not check["passed"]:
                raise VerificationError(f"{check['error']} Nothing was written.")
            model = backend.quantize(transformed.model, options)
            model.requires_grad_(False)
        with stage(bar, "eager reference", timings):
            vocab_size = int(
                model(torch.zeros(1, 1, dtype=torch.long), torch.tensor([0])).shape[-1]
            )
        constants = {
            "get_max_seq_len": options.max_chunk,
            "get_max_context_len": options.max_context,
            "get_vocab_size": vocab_size,
            "get_bos_id": bos_id,
            "get_eos_ids": eos_ids,
            "use_kv_cache": True,
            "enable_dynamic_shape": options.max_chunk > 1,
            "get_backend": BACKEND_CODES[options.backend],
            "get_kv_ring_size": min(rings, default=0),
        }
        media_ids = getattr(getattr(model, "args", None), "media_token_ids", ())
        if media_ids:
            # The soft tokens whose rows the runner passes in ``embeds`` (image, audio).
            constants["get_media_token_ids"] = list(media_ids)
        if options.verify_tokens:
            constants["get_max_verify_len"] = options.verify_tokens
        assistant = None
        if plan.assistant is not None:
            from rne_tools.export import assistant as drafting

            assistant, _ = load_assistant(plan.assistant)
            assistant = drafting.transform_for_xnnpack(assistant, model).requires_grad_(False)
            constants["get_assistant_target"] = drafting.target_hash(plan.source.hf_config)
        with stage(bar, "trace", timings):
            with returning_hidden(model) if assistant is not None else contextlib.nullcontext():
                exported = trace(model, plan)
                verify_exported = None
                if options.verify_tokens:
                    with returning_every_position(model):
                        verify_exported = trace(model, plan, options.verify_tokens)
            draft_exported = (
                drafting.trace_draft(model, assistant) if assistant is not None else None
            )
    return TracedExport(plan, model, exported, verify_exported, constants, check, timings,
                        started, draft_exported, assistant)


def run_export(
    plan: ExportPlan, output_dir: Path | str, *, verify: bool = True, progress: bool = True
) -> ExportResult:
    """Export ``plan`` into ``output_dir``; see the module docstring. Raises ``ExportError`` /
    ``CheckpointError`` on weights that do not fit the plan and ``VerificationError`` if the
    program disagrees with eager."""
    return finish_export(
        trace_export(plan, verify=verify, progress=progress), output_dir, verify=verify,
        progress=progress,
    )


def finish_export(
    traced: TracedExport,
    output_dir: Path | str,
    *,
    verify: bool = True,
    progress: bool = True,
    report_extra: dict[str, Any] | None = None,
) -> ExportResult:
    """Lower, serialize and verify a traced export into ``output_dir`` (see ``run_export``);
    ``report_extra`` is added to the report (the export cache's keys)."""
    plan, model, constants, timings = traced.plan, traced.model, traced.constants, traced.timings
    options, backend = plan.options, plan.backend
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pte_path, report_path = output_dir / f"{plan.stem}.pte", output_dir / f"{plan.stem}.report.json"
    tmp_pte = output_dir / f".{plan.stem}.pte.tmp-{os.getpid()}"
    tmp_report = output_dir / f".{plan.stem}.report.json.tmp-{os.getpid()}"
    try:
        with tqdm(total=3 if verify else 2, disable=not progress, desc="export") as bar:
            with stage(bar, "lower", timings):
                methods = {"forward": traced.exported}
                if traced.verify_exported is not None:
                    methods["verify"] = traced.verify_exported
                if traced.draft_exported is not None:
                    methods["draft"] = traced.draft_exported
                program = lower(methods, plan_lowering(plan), constants)
                # Summarised after to_executorch, whose quant fusion turns dequantize +
                # embedding into the quantized embedding kernels: this is the graph that runs.
                delegation = delegation_summary(program)
            with stage(bar, "serialize", timings):
                with tmp_pte.open("wb") as f:
                    program.write_to_file(f)
                # GPU backends check their lowering here (their runtimes are not on this host).
                backend_checks = backend.inspect(model, program, options)
                if traced.check is not None:
                    backend_checks = {**(backend_checks or {}), "transform_check": traced.check}
                del program
            verification: dict[str, Any] = {"passed": False, "status": "not run"}
            if verify:
                with stage(bar, "verify", timings):
                    verification = verify_program(tmp_pte, model, plan)
                    if options.verify_tokens:
                        verification = with_verify_method_check(verification, tmp_pte, model, plan)
                    if traced.assistant is not None:
                        verification = with_draft_method_check(
                            verification, tmp_pte, model, traced.assistant, plan)
        report = {
            "model": options.model_id,
            "architecture": options.architecture,
            "backend": options.backend,
            "quantization": options.quantization,
            "embedding_quantization": options.embedding_quantization,
            "group_size": options.group_size if options.quantization != "fp32" else None,
            "embedding_group_size": (
                options.table_group_size if options.embedding_quantization == "4w" else None
            ),
            "max_context": options.max_context,
            "max_chunk": options.max_chunk,
            "verify_tokens": options.verify_tokens,
            "assistant": (
                {"checkpoint": str(plan.assistant), "digest": options.assistant_digest}
                if plan.assistant is not None else None
            ),
            "vocab_size": constants["get_vocab_size"],
            "bos_id": constants["get_bos_id"],
            "eos_ids": constants["get_eos_ids"],
            "checkpoint": str(plan.source.checkpoint) if plan.source.checkpoint else None,
            "random_config": plan.source.random_config,
            "file": pte_path.name,
            "size": tmp_pte.stat().st_size,
            "sha256": sha256_file(tmp_pte),
            "delegation": delegation,
            "kv_cache_dtype": _kv_cache_dtype(model),
            "backend_checks": backend_checks,
            "export_seconds": round(time.perf_counter() - traced.started, 2),
            "stage_seconds": timings,
            "peak_rss_bytes": _peak_rss_bytes(),
            "verification": verification,
            "versions": versions(),
            "options": asdict(options),
            **(report_extra or {}),
        }
        tmp_report.write_text(json.dumps(report, indent=2) + "\n")
        if verification["status"] == "mismatch":
            raise VerificationError(
                f"{pte_path.name} does not compute what the eager model computes: "
                f"{verification.get('error')}. Nothing was written."
            )
        tmp_pte.replace(pte_path)
        tmp_report.replace(report_path)
    finally:
        for tmp in (tmp_pte, tmp_report):
            tmp.unlink(missing_ok=True)
    return ExportResult(pte_path, report_path, report, plan)

"""Export pipeline: checkpoint -> model -> backend transforms/quantization -> .pte + report.

``export_llm`` validates everything it can before loading any weights, writes the program and
its report under temporary names, verifies the program on the ExecuTorch Python runtime against
the eager model, and only then renames both into place. A failed verification removes the
temporary files and raises ``VerificationError``.

The program follows the .pte contract of ``shared/DESIGN.md``: ``forward(tokens[1, T],
input_pos[1]) -> logits[1, vocab]`` with dynamic ``1 <= T <= max_chunk``, and constant methods
``get_max_seq_len`` (= max_chunk), ``get_max_context_len``, ``get_vocab_size``, ``get_bos_id``
(-1 when the model has none; chat templates add their own start tokens, so runners use it
only for raw prompts), ``get_eos_ids`` (list), ``use_kv_cache``, ``enable_dynamic_shape`` and
``get_backend`` (``backends.BACKEND_CODES``: 1 xnnpack, 2 vulkan, 3 mlx) and ``get_kv_ring_size``
(the smallest ring-buffer cache in slots, 0 when every cache is flat: how far back the runner
may rewind a cache for prompt-prefix reuse).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import resource
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from rne_tools.checkpoints import load_model, random_model, read_config
from rne_tools.errors import ExportError, VerificationError
from rne_tools.export.backends import BACKEND_CODES, ExportOptions, get_backend
from rne_tools.export.verify import verify_program
from rne_tools.models import get_architecture


@dataclass(frozen=True)
class ExportResult:
    pte_path: Path
    report_path: Path
    report: dict[str, Any]


def export_stem(model_id: str, backend: str, quantization: str) -> str:
    """File name stem of an exported variant: ``<model>_<backend>_<quant>``."""
    return f"{model_id}_{backend}_{quantization}"


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from: a checkpoint directory or a named random config."""

    checkpoint: Path | None
    random_config: str | None
    hf_config: dict[str, Any]


def resolve_options(
    model_id: str,
    backend: str,
    quantization: str | None = None,
    max_context: int | None = None,
    max_chunk: int | None = None,
    embedding_quantization: str = "8w",
    group_size: int = 32,
) -> ExportOptions:
    """Fill unspecified options from the model registry's variant and validate them all."""
    from rne_tools.registry import load_registry

    spec = load_registry().model(model_id)
    variant = spec.variants.get(backend)
    get_architecture(spec.architecture)  # unknown architecture -> clear error now
    backend_impl = get_backend(backend)
    if quantization is None:
        if variant is None:
            raise ExportError(
                f"{model_id} has no {backend!r} variant in the registry; pass --quantization "
                f"({', '.join(backend_impl.allowed_quantizations)})."
            )
        quantization = variant.quantization
    if max_context is None:
        max_context = variant.max_context if variant else spec.context_length
    if max_chunk is None:
        if variant is None:
            raise ExportError(f"{model_id} has no {backend!r} variant; pass --max-chunk.")
        max_chunk = variant.max_chunk
    if max_context < 1 or max_chunk < 1:
        raise ExportError(f"max context ({max_context}) and max chunk ({max_chunk}) must be >= 1.")
    if max_chunk > max_context:
        raise ExportError(
            f"max chunk ({max_chunk}) is above max context ({max_context}): a prefill chunk "
            "must fit in the KV cache. Lower --max-chunk or raise --max-context."
        )
    options = ExportOptions(
        model_id=model_id,
        architecture=spec.architecture,
        backend=backend,
        quantization=quantization,
        max_context=max_context,
        max_chunk=max_chunk,
        embedding_quantization=embedding_quantization if quantization != "fp32" else "none",
        group_size=group_size,
    )
    backend_impl.validate(options)
    return options


def resolve_source(
    options: ExportOptions,
    checkpoint: Path | str | None,
    random_config: str | dict[str, Any] | None,
) -> ModelSource:
    """Pick the weights: an explicit checkpoint, a random config (a name of the architecture's
    ``RANDOM_CONFIGS`` or an HF config dict), or the model's default checkpoint."""
    if checkpoint is not None and random_config is not None:
        raise ExportError("Pass either a checkpoint directory or a random config, not both.")
    if isinstance(random_config, dict):
        # A full HF config (e.g. a real model's widths at reduced depth, for benchmarks).
        get_architecture(options.architecture).ModelArgs.from_hf_config(random_config)
        return ModelSource(None, "custom", dict(random_config))
    if random_config is not None:
        configs = get_architecture(options.architecture).RANDOM_CONFIGS
        if random_config not in configs:
            raise ExportError(
                f"Unknown random config {random_config!r} for {options.architecture}; "
                f"known: {', '.join(sorted(configs))}."
            )
        return ModelSource(None, random_config, dict(configs[random_config]))
    if checkpoint is None:
        if options.model_id != "smollm2_135m":
            raise ExportError(
                f"No checkpoint for {options.model_id}: download its Hugging Face checkpoint "
                "and pass --checkpoint DIR (or --random-config NAME for a test export)."
            )
        from rne_tools.gguf_import import smollm2_checkpoint

        checkpoint = smollm2_checkpoint()
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        raise ExportError(f"Checkpoint directory {checkpoint} does not exist.")
    return ModelSource(checkpoint, None, read_config(checkpoint))


def special_token_ids(source: ModelSource) -> tuple[int, list[int]]:
    """(bos id or -1, eos ids) from config.json / generation_config.json."""
    cfg = source.hf_config.get("text_config", source.hf_config)
    bos, eos = cfg.get("bos_token_id", source.hf_config.get("bos_token_id")), []
    sources = [cfg.get("eos_token_id", source.hf_config.get("eos_token_id"))]
    if source.checkpoint is not None and (source.checkpoint / "generation_config.json").is_file():
        sources.append(
            json.loads((source.checkpoint / "generation_config.json").read_text()).get(
                "eos_token_id"
            )
        )
    for value in sources:
        for token in value if isinstance(value, list) else [value]:
            if token is not None and int(token) not in eos:
                eos.append(int(token))
    if not eos:
        raise ExportError("The checkpoint's config declares no eos_token_id; the runner needs one.")
    return (-1 if bos is None else int(bos)), eos


def load_source(source: ModelSource, options: ExportOptions) -> nn.Module:
    if source.random_config is not None:
        model, _, _ = random_model(
            options.architecture, source.hf_config, options.max_context, options.max_chunk
        )
        return model
    model, _ = load_model(
        source.checkpoint, options.architecture, options.max_context, options.max_chunk
    )
    return model


@contextlib.contextmanager
def _stage(bar: tqdm, name: str, timings: dict[str, float]) -> Iterator[None]:
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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def lower(
    model: nn.Module, options: ExportOptions, constants: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """torch.export with dynamic T, lower with the backend's partitioners, emit ExecuTorch.

    Returns the ExecuTorch program and the delegation summary of the lowered graph.
    """
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass
    from torch.export import Dim, export

    backend = get_backend(options.backend)
    example = (torch.zeros(1, options.max_chunk, dtype=torch.long), torch.tensor([0]))
    # A dynamic dim needs a range; with max_chunk == 1 the shape is simply static.
    dynamic = ({1: Dim("T", min=1, max=options.max_chunk)}, None) if options.max_chunk > 1 else None
    with torch.no_grad():
        exported = export(model, example, dynamic_shapes=dynamic, strict=False)
    edge = to_edge_transform_and_lower(
        exported,
        # Backend graph passes run before partitioning (e.g. MLX's fusions and reinplacing).
        transform_passes=(
            backend.transform_passes(options) if hasattr(backend, "transform_passes") else None
        ),
        partitioner=backend.partitioners(options),
        compile_config=backend.compile_config(),
        constant_methods=constants,
    )
    program = edge.to_executorch(
        ExecutorchBackendConfig(
            extract_delegate_segments=True,
            # Fuses torchao's dequantize + embedding into the quantized embedding kernels.
            do_quant_fusion_and_const_prop=True,
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
            sym_shape_eval_pass=ConstraintBasedSymShapeEvalPass(),
        )
    )
    # Summarised after to_executorch, whose quant fusion turns dequantize + embedding into
    # the quantized embedding kernels: this is the graph that runs.
    return program, delegation_summary(program.exported_program().graph_module)


_BOOKKEEPING = {"getitem", "sym_size", "alloc"}


def delegation_summary(graph_module: Any) -> dict[str, Any]:
    """Share of the lowered graph's nodes inside delegates; ops left to portable CPU kernels."""
    from executorch.devtools.backend_debug import get_delegation_info

    info = get_delegation_info(graph_module)
    # Output unpacking, shape queries and memory planning are bookkeeping, not ops that compute.
    ops = {k: b for k, b in info.delegation_by_operator.items() if k not in _BOOKKEEPING}
    delegated = sum(b.delegated for b in ops.values())
    cpu = sum(b.non_delegated for b in ops.values())
    cpu_ops = {op: b.non_delegated for op, b in sorted(ops.items()) if b.non_delegated}
    return {
        "delegated_subgraphs": info.num_delegated_subgraphs,
        "delegated_nodes": delegated,
        "non_delegated_nodes": cpu,
        "delegated_share": round(delegated / (delegated + cpu), 4) if delegated + cpu else 0.0,
        "cpu_ops": cpu_ops,
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "executorch", "torchao")}


def export_llm(
    model_id: str,
    backend: str,
    output_dir: Path | str,
    quantization: str | None = None,
    *,
    checkpoint: Path | str | None = None,
    random_config: str | dict[str, Any] | None = None,
    max_context: int | None = None,
    max_chunk: int | None = None,
    embedding_quantization: str = "8w",
    group_size: int = 32,
    verify: bool = True,
    progress: bool = True,
) -> ExportResult:
    """Export ``model_id`` for ``backend`` into ``output_dir``; see the module docstring.

    Unspecified ``quantization``/``max_context``/``max_chunk`` come from the model registry's
    variant for ``backend``. Raises ``ExportError``/``CheckpointError``/``RegistryError`` on bad
    input (before any heavy work) and ``VerificationError`` if the program disagrees with eager.
    """
    start = time.perf_counter()
    options = resolve_options(
        model_id, backend, quantization, max_context, max_chunk, embedding_quantization, group_size
    )
    source = resolve_source(options, checkpoint, random_config)
    bos_id, eos_ids = special_token_ids(source)
    backend_impl = get_backend(backend)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    stem = export_stem(model_id, backend, options.quantization)
    pte_path, report_path = output_dir / f"{stem}.pte", output_dir / f"{stem}.report.json"
    tmp_pte = output_dir / f".{stem}.pte.tmp-{os.getpid()}"
    tmp_report = output_dir / f".{stem}.report.json.tmp-{os.getpid()}"

    timings: dict[str, float] = {}
    stages = 6 if verify else 5
    try:
        with tqdm(total=stages, disable=not progress, desc="export") as bar:
            with _stage(bar, "load", timings):
                model = load_source(source, options)
            # Ring-buffer caches (sliding layers) can be rewound only while they never wrapped:
            # the runner reads the smallest ring (0: every cache is flat) to know how far.
            rings = [m.size for m in model.modules() if getattr(m, "ring", False)]
            with _stage(bar, "transform+quantize", timings):
                model = backend_impl.transform(model, options)
                # GPU backends rewrite the model and check the rewrite on an eager probe.
                check = getattr(model, "transform_check", None)
                if verify and check is not None and not check["passed"]:
                    raise VerificationError(f"{check['error']} Nothing was written.")
                model = backend_impl.quantize(model, options)
                model.requires_grad_(False)
            with _stage(bar, "eager reference", timings):
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
            with _stage(bar, "export+lower", timings):
                program, delegation = lower(model, options, constants)
            with _stage(bar, "serialize", timings):
                with tmp_pte.open("wb") as f:
                    program.write_to_file(f)
                # GPU backends check their lowering here (their runtimes are not on this host).
                backend_checks = (
                    backend_impl.inspect(model, program, options)
                    if hasattr(backend_impl, "inspect")
                    else None
                )
                del program
            verification: dict[str, Any] = {"passed": False, "status": "not run"}
            if verify:
                with _stage(bar, "verify", timings):
                    verification = verify_program(
                        tmp_pte, model, options, backend_impl, checkpoint_dir=source.checkpoint
                    )
        report = {
            "model": options.model_id,
            "architecture": options.architecture,
            "backend": options.backend,
            "quantization": options.quantization,
            "embedding_quantization": options.embedding_quantization,
            "group_size": options.group_size if options.quantization != "fp32" else None,
            "max_context": options.max_context,
            "max_chunk": options.max_chunk,
            "vocab_size": vocab_size,
            "bos_id": bos_id,
            "eos_ids": eos_ids,
            "checkpoint": str(source.checkpoint) if source.checkpoint else None,
            "random_config": source.random_config,
            "file": pte_path.name,
            "size": tmp_pte.stat().st_size,
            "sha256": _sha256(tmp_pte),
            "delegation": delegation,
            "kv_cache_dtype": _kv_cache_dtype(model),
            "backend_checks": backend_checks,
            "export_seconds": round(time.perf_counter() - start, 2),
            "stage_seconds": timings,
            "peak_rss_bytes": _peak_rss_bytes(),
            "verification": verification,
            "versions": _versions(),
            "options": asdict(options),
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
    return ExportResult(pte_path, report_path, report)

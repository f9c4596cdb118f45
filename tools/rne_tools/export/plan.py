"""An export request resolved once: ``plan_export`` -> an immutable :class:`ExportPlan`.

The plan holds everything the rest of the export reads: the options filled from the model
registry's variant and validated by the backend, where the weights come from, the backend
object and the architecture module. The cache key (``cache.cache_key``), the export
(``pipeline.run_export``), its verification and parity (``rne_tools.checks``) all take the plan,
so nothing downstream resolves the request again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

from torch import nn

from rne_tools.checkpoints import load_model, random_model, read_config
from rne_tools.errors import ExportError
from rne_tools.export.backends import Backend, ExportOptions, get_backend, require_architecture
from rne_tools.models import get_architecture
from rne_tools.models.layers import chunk_problem
from rne_tools.paths import export_stem


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from: a checkpoint directory or a random config (a name of the
    architecture's ``RANDOM_CONFIGS``, or ``"custom"`` for an HF config dict)."""

    checkpoint: Path | None
    random_config: str | None
    hf_config: dict[str, Any]


@dataclass(frozen=True)
class ExportPlan:
    options: ExportOptions
    source: ModelSource
    backend: Backend
    # The module implementing ``options.architecture`` (``rne_tools.models.<name>``).
    architecture: ModuleType
    # The Gemma 4 assistant checkpoint traced into the ``draft`` method (export.assistant).
    assistant: Path | None = None

    @property
    def stem(self) -> str:
        """File name stem of the exported variant: ``<model>_<backend>_<quant>``."""
        return export_stem(self.options.model_id, self.options.backend, self.options.quantization)

    def load_model(self) -> nn.Module:
        """The eager model with the source's weights, as the export starts from it."""
        o = self.options
        if self.source.random_config is not None:
            model, _, _ = random_model(o.architecture, self.source.hf_config, o.max_context,
                                       o.max_chunk)
            return model
        model, _ = load_model(self.source.checkpoint, o.architecture, o.max_context, o.max_chunk)
        return model

    def special_token_ids(self) -> tuple[int, list[int]]:
        """(bos id or -1, eos ids) from config.json / generation_config.json."""
        hf_config, checkpoint = self.source.hf_config, self.source.checkpoint
        cfg = hf_config.get("text_config", hf_config)
        bos, eos = cfg.get("bos_token_id", hf_config.get("bos_token_id")), []
        sources = [cfg.get("eos_token_id", hf_config.get("eos_token_id"))]
        if checkpoint is not None and (checkpoint / "generation_config.json").is_file():
            sources.append(
                json.loads((checkpoint / "generation_config.json").read_text()).get("eos_token_id")
            )
        for value in sources:
            for token in value if isinstance(value, list) else [value]:
                if token is not None and int(token) not in eos:
                    eos.append(int(token))
        if not eos:
            raise ExportError(
                "The checkpoint's config declares no eos_token_id; the runner needs one."
            )
        return (-1 if bos is None else int(bos)), eos


class RequestOptions(TypedDict, total=False):
    """The optional keyword inputs of an export request, as ``plan_export`` takes them."""

    checkpoint: Path | str | None
    random_config: str | dict[str, Any] | None
    max_context: int | None
    max_chunk: int | None
    embedding_quantization: str
    group_size: int
    embedding_group_size: int
    verify_tokens: int
    assistant: Path | str | None


def plan_export(
    model_id: str,
    backend: str,
    quantization: str | None = None,
    *,
    checkpoint: Path | str | None = None,
    random_config: str | dict[str, Any] | None = None,
    max_context: int | None = None,
    max_chunk: int | None = None,
    embedding_quantization: str | None = None,
    group_size: int | None = None,
    embedding_group_size: int | None = None,
    verify_tokens: int | None = None,
    assistant: Path | str | None = None,
) -> ExportPlan:
    """Resolve and validate an export request before any weights load.

    Unspecified ``quantization``/``max_context``/``max_chunk``/``embedding_quantization``/
    ``group_size``/``embedding_group_size`` come from the model registry's variant for
    ``backend`` (tables: "8w" where it says none; linears grouped by 32 and tables like the
    linears where it says none);
    without ``checkpoint`` or ``random_config`` the weights are the registry's source for the
    model (``gguf_import.default_checkpoint``). Raises
    ``ExportError``/``CheckpointError``/``RegistryError`` on bad input.
    """
    from rne_tools.registry import load_registry

    spec = load_registry().model(model_id)
    variant = spec.variants.get(backend)
    architecture = get_architecture(spec.architecture)  # unknown architecture -> clear error now
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
    if embedding_quantization is None:
        embedding_quantization = (variant and variant.embedding_quantization) or "8w"
    if problem := chunk_problem(max_chunk, max_context):
        raise ExportError(f"{problem}. Lower --max-chunk or raise --max-context.")
    verify_tokens = verify_tokens or 0
    if verify_tokens and not 2 <= verify_tokens <= max_chunk:
        raise ExportError(
            f"--verify-tokens {verify_tokens} must be 0 (no verify method) or 2..max chunk "
            f"({max_chunk}): a verify chunk is the last token plus at least one draft, and it is "
            "written into the KV cache like a prefill chunk."
        )
    if verify_tokens and backend_impl.verify_problem:
        raise ExportError(
            f"{backend} programs cannot carry a verify method yet: {backend_impl.verify_problem}. "
            "Export without --verify-tokens (speculative decoding then stays off)."
        )
    options = ExportOptions(
        model_id=model_id,
        architecture=spec.architecture,
        backend=backend,
        quantization=quantization,
        max_context=max_context,
        max_chunk=max_chunk,
        embedding_quantization=embedding_quantization if quantization != "fp32" else "none",
        group_size=group_size or (variant and variant.group_size) or ExportOptions.group_size,
        embedding_group_size=embedding_group_size or (variant and variant.embedding_group_size),
        verify_tokens=verify_tokens,
    )
    require_architecture(backend_impl, spec.architecture)
    backend_impl.validate(options)
    source = _resolve_source(options, architecture, checkpoint, random_config)
    if assistant is not None:
        from rne_tools.export.assistant import check_request

        digest = check_request(assistant, backend, spec.architecture, source.hf_config,
                               verify_tokens, max_chunk)
        options = replace(options, assistant_digest=digest)
        return ExportPlan(options, source, backend_impl, architecture, Path(assistant))
    return ExportPlan(options, source, backend_impl, architecture)


def _resolve_source(
    options: ExportOptions,
    architecture: ModuleType,
    checkpoint: Path | str | None,
    random_config: str | dict[str, Any] | None,
) -> ModelSource:
    """Pick the weights: an explicit checkpoint, a random config (a name of the architecture's
    ``RANDOM_CONFIGS`` or an HF config dict), or the model's default checkpoint."""
    if checkpoint is not None and random_config is not None:
        raise ExportError("Pass either a checkpoint directory or a random config, not both.")
    if isinstance(random_config, dict):
        # A full HF config (e.g. a real model's widths at reduced depth, for benchmarks).
        architecture.ModelArgs.from_hf_config(random_config)
        return ModelSource(None, "custom", dict(random_config))
    if random_config is not None:
        configs = architecture.RANDOM_CONFIGS
        if random_config not in configs:
            raise ExportError(
                f"Unknown random config {random_config!r} for {options.architecture}; "
                f"known: {', '.join(sorted(configs))}."
            )
        return ModelSource(None, random_config, dict(configs[random_config]))
    if checkpoint is None:
        from rne_tools.gguf_import import default_checkpoint

        checkpoint = default_checkpoint(options.model_id)
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        raise ExportError(f"Checkpoint directory {checkpoint} does not exist.")
    return ModelSource(checkpoint, None, read_config(checkpoint))

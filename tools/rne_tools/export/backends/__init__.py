"""Export backends: each turns a model into partitioned, lowered ExecuTorch code for one target.

A backend is a small object in ``backends/<name>.py``, a subclass of :class:`Backend`, for each
backend of the catalog (``model-registry/backends.yaml``). ``rne_tools.export.plan`` calls
``validate`` (refuse impossible options before any work) once, when it resolves a request;
``rne_tools.export.pipeline`` then calls, in order: ``transform`` (source rewrites such as
custom ops, with their check), ``quantize``, ``transform_passes``, ``partitioners`` and
``compile_config`` to lower, and ``inspect`` on the lowered program.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn

from rne_tools.backend_catalog import load_catalog
from rne_tools.errors import ExportError

# Integer codes returned by the `get_backend` constant method (the .pte contract is string-free),
# from the backend catalog (model-registry/backends.yaml).
BACKEND_CODES: dict[str, int] = load_catalog().pte_codes()

EMBEDDING_QUANTIZATIONS = ("8w", "4w", "none")


@dataclass(frozen=True)
class ExportOptions:
    """Everything that determines an exported program (also the export cache key)."""

    model_id: str
    architecture: str
    backend: str
    quantization: str
    max_context: int
    max_chunk: int
    embedding_quantization: str = "8w"  # only for quantized variants; "none" keeps fp32 tables
    group_size: int = 32
    # Group of the 4-bit tables only looked up (a table a head shares keeps ``group_size``);
    # None: ``group_size``.
    embedding_group_size: int | None = None
    # Tokens of the speculative-decoding ``verify`` method's chunk (0: no such method). Added
    # after programs were cached: keyed only when set, so programs without it keep their keys.
    verify_tokens: int = field(default=0, metadata={"keyed_when_set": True})
    # Digest of the Gemma 4 assistant checkpoint whose ``draft`` method the program carries
    # (``export.assistant``; empty: none). Keyed only when set, like ``verify_tokens``.
    assistant_digest: str = field(default="", metadata={"keyed_when_set": True})

    @property
    def table_group_size(self) -> int:
        return self.embedding_group_size or self.group_size

    def key_fields(self) -> dict[str, Any]:
        """The options as cache keys hash them: every field, except those marked
        ``keyed_when_set`` while they hold their default."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if not (f.metadata.get("keyed_when_set") and getattr(self, f.name) == f.default)
        }


@dataclass(frozen=True)
class TransformResult:
    """A backend's source-transformed model and, for backends that check their rewrite on an
    eager probe (``rne_tools.checks.transform``), that check's summary (``passed``, ``error``)."""

    model: nn.Module
    check: dict[str, Any] | None = None


class Backend:
    """What the export calls on a backend; subclasses set the attributes and override the
    methods without a default."""

    name: str
    # Backend name as the ExecuTorch runtime registers it (e.g. "XnnpackBackend"), used to decide
    # whether the Python runtime here can run the program for verification.
    runtime_name: str
    allowed_quantizations: tuple[str, ...]
    # The low precision the delegate computes in (Vulkan's force_fp16, MLX's bf16 activations);
    # None when it computes in float32 like the eager graph. Verification then judges the program
    # against the eager model in float32, and runs the eager model in this precision too, to know
    # how far that precision alone moves the tokens.
    compute_dtype: torch.dtype | None
    # Why this backend cannot carry a ``verify`` method next to ``forward`` (None: it can). The
    # two methods must read and write one set of KV caches (``share_mutable_buffers``).
    verify_problem: str | None = None

    def validate(self, options: ExportOptions) -> None:
        """Raise ExportError naming the allowed values if ``options`` cannot be exported."""
        raise NotImplementedError

    def transform(self, model: nn.Module, options: ExportOptions) -> TransformResult:
        """Source transforms before quantization (custom ops etc.); the result's model may be
        ``model`` itself."""
        raise NotImplementedError

    def quantize(self, model: nn.Module, options: ExportOptions) -> nn.Module:
        """Quantize in place / return the quantized model for ``options.quantization``."""
        raise NotImplementedError

    def transform_passes(self, options: ExportOptions) -> list[Any] | None:
        """Graph passes run before partitioning (e.g. MLX's fusions); None: the default ones."""
        return None

    def partitioners(self, options: ExportOptions) -> list[Any]:
        """Partitioners handed to ``to_edge_transform_and_lower``."""
        raise NotImplementedError

    def compile_config(self) -> Any:
        """The ``EdgeCompileConfig`` for lowering."""
        raise NotImplementedError

    def inspect(
        self, model: nn.Module, program: Any, options: ExportOptions
    ) -> dict[str, Any] | None:
        """Checks of the lowered ``program`` for the report's ``backend_checks`` (raising
        VerificationError when it fails them); None for a backend without any."""
        return None


# Every backend of the catalog exports through its own module, backends/<name>.py.
_BACKEND_MODULES: dict[str, str] = {
    name: f"rne_tools.export.backends.{name}" for name in load_catalog().names()
}


def backend_names() -> list[str]:
    return sorted(_BACKEND_MODULES)


def get_backend(name: str) -> Backend:
    """The backend called ``name``; a clear error names the known ones."""
    if name not in _BACKEND_MODULES:
        raise ExportError(
            f"Unknown backend {name!r}; known backends: {', '.join(backend_names())}."
        )
    return importlib.import_module(_BACKEND_MODULES[name]).BACKEND


def check_quantization(backend: Backend, options: ExportOptions) -> None:
    """Shared check: the quantization and embedding quantization are ones this backend takes."""
    if options.quantization not in backend.allowed_quantizations:
        raise ExportError(
            f"Backend {backend.name!r} cannot take quantization {options.quantization!r}; "
            f"allowed: {', '.join(backend.allowed_quantizations)}."
        )
    if options.embedding_quantization not in EMBEDDING_QUANTIZATIONS:
        raise ExportError(
            f"Unknown embedding quantization {options.embedding_quantization!r}; "
            f"allowed: {', '.join(EMBEDDING_QUANTIZATIONS)}."
        )


def require_architecture(backend: Backend, architecture: str) -> None:
    """Shared check: the backend's source transforms are written for ``architecture``, as its
    entry in ``backends.yaml`` declares (``architectures``; none listed: every one)."""
    info = load_catalog().backend(backend.name)
    if not info.takes(architecture):
        raise ExportError(
            f"The {backend.name} backend's source transforms are written for the "
            f"{' and '.join(info.architectures)} architectures (backends.yaml); {architecture!r} "
            "models export with --backend xnnpack."
        )

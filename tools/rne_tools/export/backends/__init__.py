"""Export backends: each turns a model into partitioned, lowered ExecuTorch code for one target.

A backend is a small object in ``backends/<name>.py`` implementing :class:`Backend`; register it
in ``_BACKEND_MODULES``. The pipeline (``rne_tools.export.pipeline``) calls, in order:
``validate`` (refuse impossible options before any work), ``transform`` (source rewrites such
as custom ops), ``quantize``, then lowers with ``partitioners`` and ``compile_config``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from rne_tools.errors import ExportError

# Integer codes returned by the `get_backend` constant method (the .pte contract is string-free).
BACKEND_CODES: dict[str, int] = {"xnnpack": 1, "vulkan": 2, "mlx": 3}

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


class Backend(Protocol):
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

    def validate(self, options: ExportOptions) -> None:
        """Raise ExportError naming the allowed values if ``options`` cannot be exported."""

    def transform(self, model: nn.Module, options: ExportOptions) -> nn.Module:
        """Source transforms before quantization (custom ops etc.); may return ``model``."""

    def quantize(self, model: nn.Module, options: ExportOptions) -> nn.Module:
        """Quantize in place / return the quantized model for ``options.quantization``."""

    def partitioners(self, options: ExportOptions) -> list[Any]:
        """Partitioners handed to ``to_edge_transform_and_lower``."""

    def compile_config(self) -> Any:
        """The ``EdgeCompileConfig`` for lowering."""


_BACKEND_MODULES: dict[str, str] = {
    "xnnpack": "rne_tools.export.backends.xnnpack",
    "mlx": "rne_tools.export.backends.mlx",
    "vulkan": "rne_tools.export.backends.vulkan",
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

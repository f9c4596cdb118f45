"""What a loaded registry is: its models, their variants and file sets, as frozen records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rne_tools.errors import RegistryError

Status = Literal["published", "unpublished"]

# Capabilities that need an encoder program beside the text decoder, and the key of that encoder
# in a variant's `encoders` (the same word).
MEDIA_CAPABILITIES = ("vision", "audio")

# Architectures with an assistant drafter, and the backends whose exports carry its `draft`
# method (rne_tools.export.assistant refuses the others; docs/design.md says what they lack).
ASSISTANT_BACKENDS = {"gemma4": ("xnnpack",)}


class _Published:
    """A published-or-not part of the registry: its ``status``."""

    status: Status

    @property
    def published(self) -> bool:
        return self.status == "published"


@dataclass(frozen=True)
class FileSpec:
    """One file of a published or unpublished file set (sha256/size only when published)."""

    path: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class FileSet(_Published):
    status: Status
    files: tuple[FileSpec, ...]


@dataclass(frozen=True)
class EncoderSpec(_Published):
    """One encoder program of a variant (sha256/size only when published)."""

    status: Status
    file: FileSpec


@dataclass(frozen=True)
class AssistantSpec(_Published):
    """A variant's program with the assistant drafter: the same variant exported with
    ``--assistant`` (the checkpoint of ``hf_repo``) and ``--verify-tokens verify_tokens``. It
    replaces the variant's program for apps that ask for the assistant; sha256/size only when
    published."""

    status: Status
    file: FileSpec
    hf_repo: str
    verify_tokens: int
    # The runner's measured peak resident memory with this program; None: not measured.
    peak_memory_bytes: int | None = None


@dataclass(frozen=True)
class VariantSpec(_Published):
    backend: str
    quantization: str
    status: Status
    files: tuple[FileSpec, ...]
    max_context: int
    max_chunk: int
    min_platform: dict[str, str | int]
    # Embedding tables of a quantized variant ("8w", "4w", "none"); None: the exporter's default.
    embedding_quantization: str | None = None
    # Group of the 4-bit linears; None: the exporter's default (32).
    group_size: int | None = None
    # Group of the 4-bit tables only looked up; None: the linears' (a head's table keeps theirs).
    embedding_group_size: int | None = None
    # The encoder of each media capability ("vision", "audio") the model declares.
    encoders: dict[str, EncoderSpec] = field(default_factory=dict)
    # The runner's measured peak resident memory; None: not measured (nothing is checked).
    peak_memory_bytes: int | None = None
    # The program with the assistant drafter, downloaded instead of `pte` when asked for.
    assistant: AssistantSpec | None = None

    @property
    def pte(self) -> FileSpec:
        """The variant's program file (the one ``.pte`` among its files)."""
        return next(f for f in self.files if f.path.endswith(".pte"))


@dataclass(frozen=True)
class ModelSpec:
    id: str
    name: str
    family: str
    architecture: str
    license: str
    source: dict[str, Any]
    hf_repo: str
    revision: str
    context_length: int
    capabilities: tuple[str, ...]
    generation: dict[str, float | int]
    tokenizer: FileSet
    chat_template: str
    platform_defaults: dict[str, str]
    variants: dict[str, VariantSpec]
    source_file: Path = field(compare=False)

    def variant(self, backend: str) -> VariantSpec:
        """The variant for ``backend``; a clear error names the backends this model ships."""
        try:
            return self.variants[backend]
        except KeyError:
            shipped = ", ".join(sorted(self.variants))
            raise RegistryError(
                f"model '{self.id}' has no '{backend}' variant; it ships: {shipped}"
            ) from None


@dataclass(frozen=True)
class Registry:
    models: dict[str, ModelSpec]
    directory: Path

    def model(self, model_id: str) -> ModelSpec:
        """The model with id ``model_id``; a clear error lists the known ids."""
        try:
            return self.models[model_id]
        except KeyError:
            known = ", ".join(sorted(self.models))
            raise RegistryError(f"unknown model id '{model_id}'; known models: {known}") from None

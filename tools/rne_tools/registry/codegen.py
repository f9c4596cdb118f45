"""What the npm package derives from the registry: the TypeScript ``models`` object
(``registry.generated.ts``); from the backend catalog (``model-registry/backends.yaml``,
``rne_tools.backend_catalog``), the TypeScript backend tables and the C++ header of the native
seam; from the sampler's options (``cpp/runner/sampler_options.yaml``), the ranges C++ and
TypeScript check; and from a chat format's syntax (``model-registry/chat_formats/``), its
markers for both. Generation is deterministic, and a file is rewritten only when its content
changes."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rne_tools import strict_yaml
from rne_tools.backend_catalog import (
    CATALOG_FILE,
    PROCESSORS,
    SIMULATOR_RULES,
    BackendCatalog,
    load_catalog,
)
from rne_tools.files import write_atomically
from rne_tools.paths import PACKAGE_DIR, REPO_ROOT
from rne_tools.registry.chat_formats import load_chat_format
from rne_tools.registry.sampler_options import (
    SAMPLER_OPTIONS_FILE,
    SamplerOption,
    load_sampler_options,
)
from rne_tools.registry.schema import schema
from rne_tools.registry.specs import MEDIA_CAPABILITIES, FileSpec, ModelSpec, Registry

GENERATED_TS = PACKAGE_DIR / "src" / "models" / "registry.generated.ts"
GENERATED_BACKENDS_TS = PACKAGE_DIR / "src" / "backends.generated.ts"
GENERATED_BACKENDS_H = PACKAGE_DIR / "cpp" / "seam" / "backend_catalog.generated.h"
GENERATED_GEMMA4_TS = PACKAGE_DIR / "src" / "chat" / "formats" / "gemma4.generated.ts"
GENERATED_GEMMA4_H = PACKAGE_DIR / "cpp" / "chat" / "include" / "rne" / "chat" / "gemma4_syntax.generated.h"
GENERATED_SAMPLING_TS = PACKAGE_DIR / "src" / "llm" / "sampling.generated.ts"
GENERATED_SAMPLING_H = (
    PACKAGE_DIR / "cpp" / "runner" / "include" / "rne" / "runner" / "sampler_ranges.generated.h"
)
REGENERATE_COMMAND = ".venv/bin/python tools/gen_registry.py"


# --- The models object ---------------------------------------------------------------------


def _generated_header(comment: str, source: str) -> str:
    return (
        f"{comment} GENERATED FILE: do not edit. Source: model-registry/{source}.\n"
        f"{comment} Regenerate with: {REGENERATE_COMMAND}\n"
    )


_TS_HEADER = _generated_header("//", "<family>.yaml") + "/* eslint-disable */\n"

_TS_TYPES = """\
import type {{ Backend, Platform }} from '../backends.generated';

export type {{ Backend, Platform }};

/** A weight/activation quantization scheme of a variant. */
export type Quantization = {quantizations};

/** A model capability. */
export type Capability = {capabilities};

/** A file with the checksum and size the client verifies before first use. */
export interface PublishedFile {{
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
}}

/** A file that is not published yet: it has no checksum, so clients refuse to download it. */
export interface UnpublishedFile {{
  readonly path: string;
}}

/** Files published together; `status` says whether they can be downloaded. */
export type FileSet =
  | {{ readonly status: 'published'; readonly files: readonly PublishedFile[] }}
  | {{ readonly status: 'unpublished'; readonly files: readonly UnpublishedFile[] }};

/** Minimum OS versions: iOS as "major.minor", Android as an API level. */
export interface MinPlatform {{
  readonly ios?: string;
  readonly android?: number;
}}

/** A media capability: the model takes images (`vision`) or audio (`audio`) through an encoder. */
export type MediaCapability = {media_capabilities};

/**
 * An encoder program of a variant: published with its checksum and size, or not yet (then it is
 * never downloaded and the model loads without it).
 */
export type EncoderDescriptor =
  | ({{ readonly status: 'published' }} & PublishedFile)
  | ({{ readonly status: 'unpublished' }} & UnpublishedFile);

/**
 * The variant's program with the assistant drafter (Gemma 4's), exported from `sourceRepo`: it
 * is downloaded instead of the variant's program when the app loads with `assistant: true`, and
 * makes `speculative: {{ drafter: 'assistant' }}` available. Unpublished: never downloaded.
 */
export type AssistantDescriptor = (
  | ({{ readonly status: 'published' }} & PublishedFile)
  | ({{ readonly status: 'unpublished' }} & UnpublishedFile)
) & {{
  /** The Hugging Face repository of the assistant checkpoint it was exported from. */
  readonly sourceRepo: string;
  /** Tokens one verify call scores: the round's token and up to `verifyTokens - 1` drafts. */
  readonly verifyTokens: number;
  /**
   * The runner's measured peak resident memory with this program, in bytes (its verify method
   * packs its own copy of the weights). Absent: the variant's `peakMemoryBytes` is checked.
   */
  readonly peakMemoryBytes?: number;
}};

/** One exported `.pte` variant of a model for one backend. */
export type VariantDescriptor<B extends Backend = Backend> = FileSet & {{
  readonly backend: B;
  readonly quantization: Quantization;
  /** KV capacity the variant was exported with (prompt + generated tokens). */
  readonly maxContext: number;
  readonly minPlatform: MinPlatform;
  /**
   * The runner's measured peak resident memory with this variant, in bytes: LLMModule refuses
   * to load it (`insufficient_memory`) where the OS offers less. Absent: not measured.
   */
  readonly peakMemoryBytes?: number;
  /** The encoder of each media capability of the model (one for each it declares). */
  readonly encoders?: {{ readonly [C in MediaCapability]?: EncoderDescriptor }};
  /** The program with the assistant drafter, where the variant has one. */
  readonly assistant?: AssistantDescriptor;
}};

/** Default generation settings of a model (the model authors' recommendations). */
export interface GenerationDefaults {{
  readonly temperature: number;
  readonly topK?: number;
  readonly topP?: number;
  readonly minP?: number;
  readonly repetitionPenalty?: number;
  readonly maxNewTokens: number;
}}

/** Tokenizer files and which of them holds the chat template. */
export type TokenizerDescriptor = FileSet & {{
  readonly chatTemplate: string;
}};

/** A model of the registry. `B` is the union of the backends it ships. */
export interface LLMDescriptor<B extends Backend = Backend> {{
  readonly kind: 'llm';
  readonly id: string;
  readonly name: string;
  readonly family: string;
  readonly architecture: string;
  readonly license: string;
  readonly hf: {{ readonly repo: string; readonly revision: string }};
  readonly contextLength: number;
  readonly capabilities: readonly Capability[];
  readonly generation: GenerationDefaults;
  readonly tokenizer: TokenizerDescriptor;
  readonly platformDefaults: {{ readonly [P in Platform]: B }};
  readonly variants: {{ readonly [K in B]: VariantDescriptor<K> }};
}}
"""

_GENERATION_KEYS = {
    "temperature": "temperature",
    "top_k": "topK",
    "top_p": "topP",
    "min_p": "minP",
    "repetition_penalty": "repetitionPenalty",
    "max_new_tokens": "maxNewTokens",
}


@dataclass(frozen=True)
class _TsName:
    """A constant declared earlier in the generated file, rendered by its name."""

    name: str


def _ts(value: Any, indent: int) -> str:
    """Render a JSON-like value as a TypeScript literal (stable key order as given)."""
    pad = "  " * indent
    inner = "  " * (indent + 1)
    if isinstance(value, _TsName):
        return value.name
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{_ts_key(k)}: {_ts(v, indent + 1)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + f"\n{pad}}}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [f"{inner}{_ts(v, indent + 1)}," for v in value]
        return "[\n" + "\n".join(items) + f"\n{pad}]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _ts_string(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return repr(value)
    raise TypeError(f"cannot render {type(value).__name__} as TypeScript")


def _ts_string(text: str) -> str:
    """A single-quoted TypeScript string literal with JSON escaping (backslashes, control
    characters, every non-ASCII character incl. U+2028/U+2029) plus `'`, so no registry text can
    end the literal. JSON always escapes `"`, and the literal does not need it escaped."""
    body = json.dumps(text, ensure_ascii=True)[1:-1]
    return "'" + body.replace('\\"', '"').replace("'", "\\'") + "'"


def _ts_comment(text: str) -> str:
    """Registry text inside a /** */ comment: one escaped line that cannot close the comment."""
    return json.dumps(text, ensure_ascii=True)[1:-1].replace("*/", "*\\/")


def _ts_key(key: str) -> str:
    return key if key.isascii() and key.isidentifier() else _ts_string(key)


def _file_entries(files: Iterable[FileSpec]) -> list[dict[str, Any]]:
    out = []
    for f in files:
        entry: dict[str, Any] = {"path": f.path}
        if f.sha256 is not None:
            entry["sha256"] = f.sha256
            entry["size"] = f.size
        out.append(entry)
    return out


def _descriptor(spec: ModelSpec) -> dict[str, Any]:
    variants = {}
    for backend, v in spec.variants.items():
        variants[backend] = {
            "backend": backend,
            "quantization": v.quantization,
            "status": v.status,
            "maxContext": v.max_context,
            "minPlatform": dict(sorted(v.min_platform.items())),
            "files": _file_entries(v.files),
        }
        if v.peak_memory_bytes is not None:
            variants[backend]["peakMemoryBytes"] = v.peak_memory_bytes
        if v.encoders:
            variants[backend]["encoders"] = {
                kind: {"status": e.status, **_file_entries([e.file])[0]}
                for kind, e in sorted(v.encoders.items(), key=lambda item: MEDIA_CAPABILITIES.index(item[0]))
            }
        if v.assistant is not None:
            variants[backend]["assistant"] = {
                "status": v.assistant.status,
                **_file_entries([v.assistant.file])[0],
                "sourceRepo": v.assistant.hf_repo,
                "verifyTokens": v.assistant.verify_tokens,
            }
            if v.assistant.peak_memory_bytes is not None:
                variants[backend]["assistant"]["peakMemoryBytes"] = v.assistant.peak_memory_bytes
    return {
        "kind": "llm",
        "id": spec.id,
        "name": spec.name,
        "family": spec.family,
        "architecture": spec.architecture,
        "license": spec.license,
        "hf": {"repo": spec.hf_repo, "revision": spec.revision},
        "contextLength": spec.context_length,
        "capabilities": list(spec.capabilities),
        "generation": {
            ts_key: spec.generation[key]
            for key, ts_key in _GENERATION_KEYS.items()
            if key in spec.generation
        },
        "tokenizer": {
            "status": spec.tokenizer.status,
            "chatTemplate": spec.chat_template,
            "files": _file_entries(spec.tokenizer.files),
        },
        "platformDefaults": {p: spec.platform_defaults[p] for p in ("ios", "android")},
        "variants": variants,
    }


def _shared_encoders(model_id: str, descriptor: dict[str, Any]) -> str | None:
    """Where two or more of a model's variants list the same encoders (the XNNPACK encoders
    serve every backend), the declaration of one constant holding them; ``descriptor``'s
    variants then name it instead of repeating the set."""
    variants = [v for v in descriptor["variants"].values() if "encoders" in v]
    sets = [json.dumps(v["encoders"], sort_keys=True) for v in variants]
    common = max(sets, key=sets.count, default=None)  # the first of the most shared: stable
    if common is None or sets.count(common) < 2:
        return None
    name = _TsName(f"{model_id}_encoders")
    value = variants[sets.index(common)]["encoders"]
    for variant, text in zip(variants, sets, strict=True):
        if text == common:
            variant["encoders"] = name
    return (
        f"/** The encoders {sets.count(common)} of {model_id}'s variants share. */\n"
        f"const {name.name} = {_ts(value, 0)} as const;\n"
    )


def _union(values: Iterable[str]) -> str:
    return " | ".join(_ts_string(v) for v in values)


def generate_typescript(registry: Registry) -> str:
    """The content of ``registry.generated.ts``: types plus the ``models`` object.

    Deterministic: models are sorted by id, keys keep the registry's order.
    """
    defs = schema()["$defs"]
    capabilities = defs["model"]["properties"]["capabilities"]["items"]["enum"]
    parts = [
        _TS_HEADER,
        _TS_TYPES.format(
            quantizations=_union(defs["quantization"]["enum"]),
            capabilities=_union(capabilities),
            media_capabilities=_union(MEDIA_CAPABILITIES),
        ),
    ]
    entries = []
    for model_id in sorted(registry.models):
        spec = registry.models[model_id]
        backends = _union(spec.variants)
        descriptor = _descriptor(spec)
        shared = _shared_encoders(model_id, descriptor)
        if shared is not None:
            parts.append(shared)
        entries.append(
            f"  /** {_ts_comment(spec.name)} ({spec.family}); ships: {', '.join(spec.variants)}. */\n"
            f"  {_ts_key(model_id)}: {_ts(descriptor, 1)} as const satisfies "
            f"LLMDescriptor<{backends}>,"
        )
    parts.append(
        "/** Every LLM of the registry, by id. */\n"
        "const llm = {\n" + "\n".join(entries) + "\n};\n\n"
        "/** The model registry: `models.llm.<id>`. */\n"
        "export const models = { llm } as const;\n\n"
        "/** Id of a model in the registry. */\n"
        "export type LLMModelId = keyof typeof llm;\n"
    )
    return "\n".join(parts)


def _matches(target: Path, content: str) -> bool:
    """Whether ``target`` is a regular file holding exactly ``content`` (read without blocking:
    a FIFO or a device there is simply not a match)."""
    expected = content.encode()
    try:
        return strict_yaml.read_regular(target, len(expected)) == expected
    except strict_yaml.FileReadError:
        return False


def _write(target: Path, content: str) -> bool:
    """Write ``target`` atomically; returns whether its content changed. ``OSError`` if the
    target's folder cannot take it."""
    if _matches(target, content):
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, content, mode=0o644)
    return True


def write_typescript(registry: Registry, target: Path = GENERATED_TS) -> bool:
    """Write the generated file (atomically); returns whether its content changed."""
    return _write(target, generate_typescript(registry))


# --- Backend catalog outputs ---------------------------------------------------------------

_BACKENDS_TS = """\
/** A platform the SDK runs on. */
export type Platform = {platforms};

/** A compute backend a model variant is exported for. */
export type Backend = {backends};

/**
 * How a backend may run on a platform's simulator or emulator: `never` (not even when asked
 * for), `explicit_only` (when asked for by name, never chosen automatically) or `allowed`.
 */
export type SimulatorRule = {rules};

/** What the SDK knows of a backend. */
export interface BackendInfo {{
  readonly name: Backend;
  /** Its name in messages: "MLX". */
  readonly title: string;
  /** Its name in UIs: "MLX (GPU)". */
  readonly label: string;
  readonly processor: {processors};
  /** The rule on each platform's simulator or emulator. */
  readonly simulator: {{ readonly [P in Platform]: SimulatorRule }};
}}

/** Every backend, by name. */
export const BACKENDS: {{ readonly [B in Backend]: BackendInfo }} = {table};

/** Backends each platform prefers, best first (after the model's own default). */
export const PLATFORM_PREFERENCE: {{ readonly [P in Platform]: readonly Backend[] }} = {preference};
"""


def generate_backends_typescript(catalog: BackendCatalog) -> str:
    """The content of ``backends.generated.ts``: the ``Backend`` union and the catalog as data."""
    table = {
        b.name: {
            "name": b.name,
            "title": b.title,
            "label": b.label,
            "processor": b.processor,
            "simulator": {p: b.simulator_rule(p) for p in catalog.platforms},
        }
        for b in sorted(catalog.backends, key=lambda b: b.name)
    }
    body = _BACKENDS_TS.format(
        platforms=_union(catalog.platforms),
        backends=_union(sorted(catalog.names())),
        rules=_union(SIMULATOR_RULES),
        processors=_union(PROCESSORS),
        table=_ts(table, 0),
        preference=_ts({p: list(catalog.preference(p)) for p in catalog.platforms}, 0),
    )
    return _generated_header("//", CATALOG_FILE.name) + "/* eslint-disable */\n\n" + body


def _cpp_string(text: str) -> str:
    # The catalog's loader allows only [A-Za-z0-9 .+_-] in the strings written here.
    return json.dumps(text, ensure_ascii=True)


def _cpp_enumerator(rule: str) -> str:
    return "k" + "".join(part.capitalize() for part in rule.split("_"))  # explicit_only: kExplicitOnly


def generate_backends_header(catalog: BackendCatalog) -> str:
    """The content of ``backend_catalog.generated.h``: the catalog as the native seam uses it."""
    rules = ", ".join(_cpp_enumerator(r) for r in SIMULATOR_RULES)
    fields = "".join(
        f"  SimulatorRule {p}_simulator;  // the rule on the {p} simulator / emulator\n"
        for p in catalog.platforms
    )
    rows = "".join(
        f"    {{{_cpp_string(b.name)}, {_cpp_string(b.runtime)}, "
        + ", ".join(f"SimulatorRule::{_cpp_enumerator(b.simulator_rule(p))}" for p in catalog.platforms)
        + "},\n"
        for b in sorted(catalog.backends, key=lambda b: b.name)
    )
    lookups = "".join(
        f'  if (os == "{p}") return backend.{p}_simulator;\n' for p in catalog.platforms
    )
    return (
        _generated_header("//", CATALOG_FILE.name)
        + "#pragma once\n\n#include <array>\n#include <string_view>\n\n"
        "namespace rne::seam {\n\n"
        "// How a backend may run on a platform's simulator or emulator: never (not even when asked\n"
        "// for), explicit only (when asked for by name, never chosen automatically), or allowed.\n"
        f"enum class SimulatorRule {{ {rules} }};\n\n"
        "struct BackendInfo {\n"
        '  const char* name;     // the SDK\'s name, as TypeScript passes it ("xnnpack")\n'
        '  const char* runtime;  // the delegate\'s name in the ExecuTorch runtime ("XnnpackBackend")\n'
        f"{fields}"
        "};\n\n"
        "// Every backend, by name.\n"
        f"inline constexpr std::array<BackendInfo, {len(catalog.backends)}> kBackendCatalog{{{{\n"
        f"{rows}"
        "}};\n\n"
        '// The backend\'s rule on the simulator of `os` ("ios", "android"); allowed elsewhere.\n'
        "constexpr SimulatorRule simulator_rule(const BackendInfo& backend, std::string_view os) {\n"
        f"{lookups}"
        "  return SimulatorRule::kAllowed;\n"
        "}\n\n"
        "}  // namespace rne::seam\n"
    )


# --- The sampler's ranges --------------------------------------------------------------------


def _sampler_header_comment(comment: str) -> str:
    return (
        f"{comment} GENERATED FILE: do not edit. Source: "
        f"{SAMPLER_OPTIONS_FILE.relative_to(REPO_ROOT).as_posix()}.\n"
        f"{comment} Regenerate with: {REGENERATE_COMMAND}\n"
    )


def _ts_number(value: float) -> str:
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return str(int(value)) if value == int(value) else repr(value)


def _cpp_number(value: float) -> str:
    if math.isinf(value):
        return f"{'' if value > 0 else '-'}std::numeric_limits<double>::infinity()"
    return f"{value!r}"


# A range's fields, declared once for both languages: name, TypeScript type, C++ type, comment.
_RANGE_FIELDS = (
    ("integer", "boolean", "bool", ""),
    ("low", "number", "double", ""),
    ("low_inclusive", "boolean", "bool", ""),
    ("high", "number", "double", "+infinity: no upper bound"),
    ("high_inclusive", "boolean", "bool", ""),
    ("range", "string", "const char*", 'the range as errors say it ("in (0, 1]")'),
)


def _range_values(option: SamplerOption) -> dict[str, bool | float | str]:
    return {
        "integer": option.integer,
        "low": option.low,
        "low_inclusive": option.low_inclusive,
        "high": option.high,
        "high_inclusive": option.high_inclusive,
        "range": option.range_text,
    }


def _literal(value: bool | float | str, cpp: bool) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return _cpp_number(value) if cpp else _ts_number(value)
    return _cpp_string(value) if cpp else _ts_string(value)


def generate_sampling_typescript(options: Iterable[SamplerOption]) -> str:
    """The content of ``sampling.generated.ts``: each option's range, and the values that turn
    the options off."""
    options = tuple(options)
    union = " | ".join(f"'{o.js_name}'" for o in options)
    fields = "".join(
        (f"  /** {comment} */\n" if comment else "") + f"  readonly {_camel(name)}: {ts_type};\n"
        for name, ts_type, _, comment in _RANGE_FIELDS
    )
    rows = "".join(
        f"  {o.js_name}: {{ "
        + ", ".join(f"{_camel(k)}: {_literal(v, cpp=False)}" for k, v in _range_values(o).items())
        + " },\n"
        for o in options
    )
    off = ", ".join(f"{o.js_name}: {_ts_number(o.off)}" for o in options)
    return (
        _sampler_header_comment("//")
        + "/* eslint-disable */\n\n"
        + f"/** The sampler's options that have a range. */\nexport type RangedSamplingOption = {union};\n\n"
        "/** A finite value with `low` <(=) value <(=) `high`, an integer where `integer`. */\n"
        f"export interface SamplingRange {{\n{fields}}}\n\n"
        "/** Each option's range: the native sampler refuses the same values (runner::validate). */\n"
        "export const SAMPLING_RANGES: { readonly [O in RangedSamplingOption]: SamplingRange } = {\n"
        f"{rows}"
        "};\n\n"
        "/** The value that turns each option off (the native defaults). */\n"
        f"export const SAMPLING_OFF = {{ {off} }} as const;\n"
    )


def generate_sampling_header(options: Iterable[SamplerOption]) -> str:
    """The content of ``sampler_ranges.generated.h``: each option's range, as runner::validate
    checks it, and the options' values in the same order."""
    options = tuple(options)
    fields = "".join(
        f"  {cpp_type} {name};" + (f"  // {comment}" if comment else "") + "\n"
        for name, _, cpp_type, comment in _RANGE_FIELDS
    )
    rows = "".join(
        f"    {{{_cpp_string(o.field)}, "
        + ", ".join(_literal(v, cpp=True) for v in _range_values(o).values())
        + f", {_cpp_string(o.off_text)}}},\n"
        for o in options
    )
    values = ",\n".join(f"      static_cast<double>(config.{o.field})" for o in options)
    each = " \\\n".join(f"  X({o.field}, {_cpp_string(o.js_name)})" for o in options)
    return (
        _sampler_header_comment("//")
        + "#pragma once\n\n#include <array>\n#include <limits>\n\n"
        '#include "rne/runner/sampler.h"\n\n'
        "namespace rne::runner {\n\n"
        "// A finite value with low <(=) value <(=) high, an integer where `integer`.\n"
        "struct SamplerRange {\n"
        "  const char* name;  // the SamplerConfig field\n"
        f"{fields}"
        '  const char* off;  // what the off value does ("1 = off")\n'
        "};\n\n"
        f"inline constexpr std::array<SamplerRange, {len(options)}> kSamplerRanges{{{{\n"
        f"{rows}"
        "}};\n\n"
        "// The options' values, in kSamplerRanges' order.\n"
        f"inline std::array<double, {len(options)}> sampler_values(const SamplerConfig& config) {{\n"
        f"  return {{{{\n{values},\n  }}}};\n"
        "}\n\n"
        "}  // namespace rne::runner\n\n"
        "// Every option as X(SamplerConfig field, JavaScript name), for the tables that take each\n"
        "// of them (the seam's generation options).\n"
        f"#define RNE_SAMPLER_OPTIONS(X) \\\n{each}\n"
    )


# --- Gemma 4's chat syntax -------------------------------------------------------------------


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.capitalize() for part in rest)


def generate_gemma4_typescript(syntax: dict[str, dict[str, Any]]) -> str:
    """The content of ``gemma4.generated.ts``: Gemma 4's markers as one object."""
    table = {_camel(section): {_camel(k): v for k, v in body.items()} for section, body in syntax.items()}
    return (
        _generated_header("//", "chat_formats/gemma4.yaml")
        + "/* eslint-disable */\n\n"
        + "/** The markers Gemma 4's chat template writes (special tokens of its tokenizer). */\n"
        + f"export const GEMMA4_SYNTAX = {_ts(table, 0)} as const;\n"
    )


def generate_gemma4_header(syntax: dict[str, dict[str, Any]]) -> str:
    """The content of ``gemma4_syntax.generated.h``: the markers C++ reads, as constants."""
    lines = []
    for section, body in syntax.items():
        for key, value in body.items():
            name = "kGemma4" + "".join(p.capitalize() for p in f"{section}_{key}".split("_"))
            if isinstance(value, list):
                items = ", ".join(f"std::string_view{{{_cpp_string(v)}}}" for v in value)
                lines.append(
                    f"inline constexpr std::array<std::string_view, {len(value)}> {name}{{{items}}};\n"
                )
            else:
                lines.append(f"inline constexpr std::string_view {name}{{{_cpp_string(value)}}};\n")
    return (
        _generated_header("//", "chat_formats/gemma4.yaml")
        + "#pragma once\n\n#include <array>\n#include <string_view>\n\n"
        "namespace rne::chat {\n\n"
        "// The markers Gemma 4's chat template writes (special tokens of its tokenizer).\n"
        + "".join(lines)
        + "\n}  // namespace rne::chat\n"
    )


def generated_files(registry: Registry, package_dir: Path = PACKAGE_DIR) -> dict[Path, str]:
    """Every file the registry, the backend catalog and the sampler's options generate, with its
    content, placed in ``package_dir`` as in the npm package."""
    catalog = load_catalog()
    sampler_options = load_sampler_options()
    gemma4_syntax = load_chat_format("gemma4")
    outputs = {
        GENERATED_TS: generate_typescript(registry),
        GENERATED_BACKENDS_TS: generate_backends_typescript(catalog),
        GENERATED_BACKENDS_H: generate_backends_header(catalog),
        GENERATED_SAMPLING_TS: generate_sampling_typescript(sampler_options),
        GENERATED_SAMPLING_H: generate_sampling_header(sampler_options),
        GENERATED_GEMMA4_TS: generate_gemma4_typescript(gemma4_syntax),
        GENERATED_GEMMA4_H: generate_gemma4_header(gemma4_syntax),
    }
    return {package_dir / p.relative_to(PACKAGE_DIR): text for p, text in outputs.items()}


def write_generated(registry: Registry, package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """Write every generated file; returns those whose content changed."""
    files = generated_files(registry, package_dir)
    return [path for path, content in files.items() if _write(path, content)]


def stale_files(registry: Registry, package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """The generated files that differ from what the registry and catalog generate now."""
    return [
        path
        for path, content in generated_files(registry, package_dir).items()
        if not _matches(path, content)
    ]

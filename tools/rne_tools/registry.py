"""The model registry: ``model-registry/*.yaml``, one file per model family.

It is the single source of truth for models and their per-backend variants. This module
loads and validates it (JSON Schema plus cross-checks that a schema cannot express) and
generates the TypeScript ``models`` object the React Native package ships, and from the
backend catalog (``model-registry/backends.yaml``, ``rne_tools.backend_catalog``) the
TypeScript backend tables and the C++ header of the native seam.

Every problem is reported as ``<file>: <field path>: <what is wrong>`` on one line, so a
maintainer can go straight to the line. The files are read by ``rne_tools.strict_yaml`` (YAML 1.2
core, bounded, regular files only); schema patterns must match the whole value (a trailing
newline is not "the end"), numbers are finite and integers exact in JavaScript.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jsonschema
import jsonschema.validators

from rne_tools import strict_yaml
from rne_tools.backend_catalog import (
    CATALOG_FILE,
    PROCESSORS,
    SIMULATOR_RULES,
    BackendCatalog,
    load_catalog,
)
from rne_tools.errors import RegistryError
from rne_tools.files import write_atomically
from rne_tools.models import ARCHITECTURES
from rne_tools.models.layers import chunk_problem
from rne_tools.paths import PACKAGE_DIR, REGISTRY_DIR

Status = Literal["published", "unpublished"]

SCHEMA_FILE = "schema.json"
# Model ids become keys of the generated `models.llm` object; a key that names an
# Object.prototype member would shadow or break it in JavaScript.
JS_PROTOTYPE_NAMES = frozenset(
    [
        "constructor",
        "__proto__",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    ]
)
# The file every tokenizer file set must hold: the runtimes load it.
TOKENIZER_JSON = "tokenizer.json"
# Capabilities that need an encoder program beside the text decoder, and the key of that encoder
# in a variant's `encoders` (the same word).
MEDIA_CAPABILITIES = ("vision", "audio")
# Suffixes the SDK's downloader puts beside a file in the cache (packages/react-native-executorch/
# src/resources: `<path>.part` and `.range.part` while downloading, `.verified` marks, `.lock`
# files; `.tmp` kept free for it). No path segment may end in one, in any case, or a registry file
# could be taken for the downloader's own (tests/test_registry.py checks the TypeScript's list).
RESERVED_SUFFIXES = (".part", ".verified", ".lock", ".tmp")
# Where a problem line would exceed this, the value it quotes is cut (a line must stay readable).
MAX_PROBLEM = 500
GENERATED_TS = PACKAGE_DIR / "src" / "models" / "registry.generated.ts"
GENERATED_BACKENDS_TS = PACKAGE_DIR / "src" / "backends.generated.ts"
GENERATED_BACKENDS_H = PACKAGE_DIR / "cpp" / "seam" / "backend_catalog.generated.h"
REGENERATE_COMMAND = ".venv/bin/python tools/gen_registry.py"


@dataclass(frozen=True)
class FileSpec:
    """One file of a published or unpublished file set (sha256/size only when published)."""

    path: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class FileSet:
    status: Status
    files: tuple[FileSpec, ...]

    @property
    def published(self) -> bool:
        return self.status == "published"


@dataclass(frozen=True)
class EncoderSpec:
    """One encoder program of a variant (sha256/size only when published)."""

    status: Status
    file: FileSpec

    @property
    def published(self) -> bool:
        return self.status == "published"


@dataclass(frozen=True)
class VariantSpec:
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

    @property
    def published(self) -> bool:
        return self.status == "published"

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


def _fullmatch_pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """JSON Schema ``pattern`` against the whole value: Python's ``$`` also matches before a
    trailing newline, so ``^[0-9a-f]{64}$`` alone would let ``"<sha>\\n"`` through."""
    if validator.is_type(instance, "string") and re.fullmatch(pattern, instance) is None:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _integer(checker: Any, instance: Any) -> bool:
    # Not bool (an int subclass) and not 4096.0, which JSON Schema would call an integer.
    return isinstance(instance, int) and not isinstance(instance, bool)


def _finite_number(checker: Any, instance: Any) -> bool:
    return _integer(checker, instance) or (isinstance(instance, float) and math.isfinite(instance))


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _fullmatch_pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _integer, "number": _finite_number}
    ),
)


def _short(value: Any) -> str:
    """``repr(value)``, cut to a readable length."""
    text = repr(value)
    if len(text) <= 80:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters shown"
    return f"{text[:60]}... ({size})"


def _clip(problem: str) -> str:
    return problem if len(problem) <= MAX_PROBLEM else problem[: MAX_PROBLEM - 5] + " ..."


def _schema() -> dict[str, Any]:
    """The registry's JSON Schema, its backend enum filled in from the backend catalog and its
    architecture enum from the model modules."""
    schema = json.loads((REGISTRY_DIR / SCHEMA_FILE).read_text())
    schema["$defs"]["backend"]["enum"] = list(load_catalog().names())
    schema["$defs"]["architecture"]["enum"] = sorted(ARCHITECTURES)
    return schema


def revision_pattern() -> str:
    """The schema's rule for a pinned revision (a 40-hex commit or a release tag)."""
    return _schema()["$defs"]["revision"]["pattern"]


def _schema_problems(doc: Any, name: str, validator: jsonschema.protocols.Validator) -> list[str]:
    problems = []
    for error in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        if error.validator == "oneOf" and error.context:
            # "not valid under any of the given schemas" hides the cause: report the closest branch's.
            # The branch the document got furthest into is the one it meant.
            error = max(error.context, key=lambda e: len(e.relative_path))
        # A pattern or bound alone is cryptic; the schema's description says the rule in words.
        rule = error.schema.get("description") if isinstance(error.schema, dict) else None
        hint = f" (expected {rule})" if rule and error.validator != "required" else ""
        message = error.message
        if isinstance(error.instance, (str, list, dict)):
            message = message.replace(repr(error.instance), _short(error.instance))
        where = strict_yaml.field_path(error.absolute_path)
        problems.append(_clip(f"{name}: {where}: {message}{hint}"))
    return problems


def _name_models(problems: Iterable[str], doc: Any, name: str) -> list[str]:
    """Appends the model id to problems located under ``models[i]`` (``(model 'gemma4_e2b')``)."""
    models = doc.get("models") if isinstance(doc, dict) else None
    named = []
    for problem in problems:
        match = re.match(rf"{re.escape(name)}: models\[(\d+)\]", problem)
        if match and isinstance(models, list) and int(match[1]) < len(models):
            model = models[int(match[1])]
            model_id = model.get("id") if isinstance(model, dict) else None
            if isinstance(model_id, str):
                problem += f" (model {model_id!r})"
        named.append(problem)
    return named


def _file_set_problems(
    file_set: dict[str, Any], name: str, where: str, single: bool = False
) -> Iterator[str]:
    """Published file sets must carry checksums; unpublished ones must not carry placeholders.
    ``single``: the set is one file whose fields sit at ``where`` itself (an encoder)."""
    for i, f in enumerate(file_set["files"]):
        loc = f"{name}: {where}" if single else f"{name}: {where}.files[{i}]"
        if file_set["status"] == "published":
            for key in ("sha256", "size"):
                if key not in f:
                    yield f"{loc}.{key}: required when status is 'published'"
        else:
            for key in ("sha256", "size"):
                if key in f:
                    yield (
                        f"{loc}.{key}: must be absent while status is 'unpublished' "
                        "(checksums come from the publisher, never placeholders)"
                    )


def _encoder_problems(model: dict[str, Any], name: str, where: str) -> Iterator[str]:
    """Each media capability has its encoder in every variant, and each encoder its capability;
    an encoder's checksums follow its status as a file set's do."""
    capabilities = set(model["capabilities"])
    for v, variant in enumerate(model["variants"]):
        vwhere = f"{where}.variants[{v}]"
        encoders = variant.get("encoders", {})
        for kind in MEDIA_CAPABILITIES:
            if kind in capabilities and kind not in encoders:
                yield (
                    f"{name}: {vwhere}.encoders.{kind}: missing: the model declares the '{kind}' "
                    f"capability, so every variant needs its {kind} encoder (add "
                    f"`encoders: {{{kind}: {{status: unpublished, path: ...}}}}`, or drop "
                    f"'{kind}' from capabilities)"
                )
        for kind, encoder in encoders.items():
            ewhere = f"{vwhere}.encoders.{kind}"
            if kind not in capabilities:
                yield (
                    f"{name}: {ewhere}: the model does not declare the '{kind}' capability; add "
                    f"'{kind}' to capabilities or remove this encoder"
                )
            if not encoder["path"].endswith(".pte"):
                yield f"{name}: {ewhere}.path: '{encoder['path']}' is not a .pte program"
            yield from _file_set_problems(
                {"status": encoder["status"], "files": [encoder]}, name, ewhere, single=True
            )


def _cross_problems(doc: dict[str, Any], name: str) -> Iterator[str]:
    catalog = load_catalog()
    if doc["family"] != Path(name).stem:
        yield f"{name}: family: '{doc['family']}' must match the file name '{Path(name).stem}'"
    for m, model in enumerate(doc["models"]):
        where = f"models[{m}]"
        if model["id"] in JS_PROTOTYPE_NAMES:
            yield (
                f"{name}: {where}.id: '{model['id']}' is a JavaScript Object.prototype member and "
                "cannot be a key of the generated `models.llm` object; choose another id"
            )
        if TOKENIZER_JSON not in {f["path"] for f in model["tokenizer"]["files"]}:
            yield (
                f"{name}: {where}.tokenizer.files: must include '{TOKENIZER_JSON}' (the runtimes "
                "load it)"
            )
        backends = [v["backend"] for v in model["variants"]]
        for backend in sorted({b for b in backends if backends.count(b) > 1}):
            yield f"{name}: {where}.variants: backend '{backend}' is declared more than once"
        for platform, backend in model["platform_defaults"].items():
            if backend not in backends:
                yield (
                    f"{name}: {where}.platform_defaults.{platform}: '{backend}' is not a shipped "
                    f"variant (shipped: {', '.join(backends)})"
                )
            elif platform not in catalog.backend(backend).platforms:
                yield (
                    f"{name}: {where}.platform_defaults.{platform}: '{backend}' does not run on "
                    f"{platform} ({catalog.source.name}: "
                    f"{', '.join(catalog.preference(platform))} do)"
                )
        yield from _file_set_problems(model["tokenizer"], name, f"{where}.tokenizer")
        chat_template = model["tokenizer"]["chat_template"]
        if chat_template not in {f["path"] for f in model["tokenizer"]["files"]}:
            yield (
                f"{name}: {where}.tokenizer.chat_template: '{chat_template}' is not one of the "
                "tokenizer files"
            )
        for v, variant in enumerate(model["variants"]):
            vwhere = f"{where}.variants[{v}]"
            yield from _file_set_problems(variant, name, vwhere)
            if sum(f["path"].endswith(".pte") for f in variant["files"]) != 1:
                yield f"{name}: {vwhere}.files: a variant needs exactly one .pte file"
            export = variant["export"]
            if problem := chunk_problem(export["max_chunk"], export["max_context"]):
                yield f"{name}: {vwhere}.export.max_chunk: {problem}"
            if export["max_context"] > model["context_length"]:
                yield (
                    f"{name}: {vwhere}.export.max_context: {export['max_context']} exceeds the "
                    f"model's context_length {model['context_length']}"
                )
        yield from _encoder_problems(model, name, where)


@dataclass(frozen=True)
class _CachedFile:
    """A registry file where the downloader puts it: ``<repo>/<revision>/<path>``."""

    name: str  # the family file that declares it
    model: str
    where: str  # its field: models[0].variants[1].files[0].path
    path: str
    content: tuple[str, str | None, int | None]  # status, sha256, size


def _cached_files(name: str, doc: dict[str, Any]) -> Iterator[tuple[tuple[str, str], _CachedFile]]:
    for m, model in enumerate(doc["models"]):
        folder = (model["hf"]["repo"].casefold(), model["hf"]["revision"])
        sets = [(f"models[{m}].tokenizer", model["tokenizer"])] + [
            (f"models[{m}].variants[{v}]", variant) for v, variant in enumerate(model["variants"])
        ]
        for set_where, file_set in sets:
            for i, f in enumerate(file_set["files"]):
                content = (file_set["status"], f.get("sha256"), f.get("size"))
                where = f"{set_where}.files[{i}].path"
                yield folder, _CachedFile(name, model["id"], where, f["path"], content)
        for v, variant in enumerate(model["variants"]):
            for kind, e in variant.get("encoders", {}).items():
                content = (e["status"], e.get("sha256"), e.get("size"))
                where = f"models[{m}].variants[{v}].encoders.{kind}.path"
                yield folder, _CachedFile(name, model["id"], where, e["path"], content)


def _cache_problems(docs: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    """Paths that would clash in the downloader's cache, where the files of every model with the
    same Hub repository and revision share one folder, on file systems that may ignore case:
    two paths equal but for case, a path that is a file for one entry and a folder for another,
    a segment ending in a suffix the downloader uses. The same file declared identically by two
    models of one repository and revision is fine (it is one download)."""
    files: dict[tuple[str, str, str], _CachedFile] = {}
    folders: dict[tuple[str, str, str], _CachedFile] = {}
    for name, doc in docs:
        for folder, f in _cached_files(name, doc):
            at = f"{f.name}: {f.where}: '{f.path}'"
            model = f" (model {f.model!r})"
            segments = f.path.split("/")
            reserved = [
                (seg, suffix)
                for seg in segments
                for suffix in RESERVED_SUFFIXES
                if seg.casefold().endswith(suffix)
            ]
            if reserved:
                seg, suffix = reserved[0]
                yield (
                    f"{at}: '{seg}' ends in '{suffix}', a suffix the SDK's downloader uses for its "
                    f"own files beside a download ({', '.join(RESERVED_SUFFIXES)}); rename it{model}"
                )
            key = (*folder, f.path.casefold())
            other = files.get(key)
            if other is not None:
                both_encoders = ".encoders." in other.where and ".encoders." in f.where
                if (
                    other.path == f.path
                    and other.content == f.content
                    and (other.model != f.model or both_encoders)
                ):
                    # One file, listed by two models of the same repository, or one encoder
                    # that several variants of a model share (XNNPACK's runs beside any backend).
                    continue
                if other.path == f.path and other.model == f.model:
                    yield f"{at} is already used by {other.where}{model}"
                elif other.path == f.path:
                    yield (
                        f"{at} is also declared by model {other.model!r} ({other.name}: "
                        f"{other.where}) of the same repository and revision, with another "
                        f"status, checksum or size: they would share one file{model}"
                    )
                else:
                    yield (
                        f"{at} and '{other.path}' ({other.name}: {other.where}) differ only by "
                        "case: they are one file on case-insensitive file systems (iOS, macOS, "
                        f"Windows){model}"
                    )
                continue
            user = folders.get(key)
            if user is not None:
                yield (
                    f"{at} is a file, but '{user.path}' ({user.name}: {user.where}) needs a "
                    f"folder of that name{model}"
                )
                continue
            for depth in range(1, len(segments)):
                prefix = (*folder, "/".join(segments[:depth]).casefold())
                clash = files.get(prefix)
                if clash is not None:
                    yield (
                        f"{at} needs a folder where '{clash.path}' ({clash.name}: {clash.where}) "
                        f"is a file{model}"
                    )
                    break
            else:
                files[key] = f
                for depth in range(1, len(segments)):
                    folders.setdefault((*folder, "/".join(segments[:depth]).casefold()), f)


def _file_set(raw: dict[str, Any]) -> tuple[Status, tuple[FileSpec, ...]]:
    files = tuple(FileSpec(f["path"], f.get("sha256"), f.get("size")) for f in raw["files"])
    return raw["status"], files


def _model_spec(raw: dict[str, Any], family: str, source_file: Path) -> ModelSpec:
    variants = {}
    for v in raw["variants"]:
        status, files = _file_set(v)
        variants[v["backend"]] = VariantSpec(
            backend=v["backend"],
            quantization=v["quantization"],
            status=status,
            files=files,
            max_context=v["export"]["max_context"],
            max_chunk=v["export"]["max_chunk"],
            embedding_quantization=v["export"].get("embedding_quantization"),
            group_size=v["export"].get("group_size"),
            embedding_group_size=v["export"].get("embedding_group_size"),
            min_platform=dict(v["min_platform"]),
            encoders={
                kind: EncoderSpec(e["status"], FileSpec(e["path"], e.get("sha256"), e.get("size")))
                for kind, e in v.get("encoders", {}).items()
            },
        )
    tok_status, tok_files = _file_set(raw["tokenizer"])
    return ModelSpec(
        id=raw["id"],
        name=raw["name"],
        family=family,
        architecture=raw["architecture"],
        license=raw["license"],
        source=dict(raw["source"]),
        hf_repo=raw["hf"]["repo"],
        revision=raw["hf"]["revision"],
        context_length=raw["context_length"],
        capabilities=tuple(raw["capabilities"]),
        generation=dict(raw["generation"]),
        tokenizer=FileSet(tok_status, tok_files),
        chat_template=raw["tokenizer"]["chat_template"],
        platform_defaults=dict(raw["platform_defaults"]),
        variants=variants,
        source_file=source_file,
    )


def registry_files(directory: Path = REGISTRY_DIR) -> list[Path]:
    """The family files of the registry, in a stable order (the backend catalog is not one)."""
    return sorted(p for p in directory.glob("*.yaml") if p.name != CATALOG_FILE.name)


def load_registry(directory: Path = REGISTRY_DIR) -> Registry:
    """Load and validate every family file in ``directory``.

    Raises ``RegistryError`` listing every problem found (not only the first), each naming
    the file and the field.
    """
    validator = _Validator(_schema())
    files = registry_files(directory)
    if not files:
        raise RegistryError(f"no model family files (*.yaml) in {directory}")
    problems: list[str] = []
    models: dict[str, ModelSpec] = {}
    seen_ids: dict[str, str] = {}
    valid_docs: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        name = path.name
        try:
            doc = strict_yaml.load(strict_yaml.read_file(path))
        except strict_yaml.FileReadError as exc:
            problems.append(_clip(f"{name}: {exc}"))
            continue
        except strict_yaml.StrictYamlError as exc:  # one line naming the field and the line
            lead = "not valid YAML: " if exc.invalid else ""
            problems.append(_clip(f"{name}: {lead}{exc}"))
            continue
        schema_problems = _schema_problems(doc, name, validator)
        if schema_problems:
            problems.extend(_name_models(schema_problems, doc, name))
            continue
        valid_docs.append((name, doc))
        problems.extend(_name_models(_cross_problems(doc, name), doc, name))
        for m, raw in enumerate(doc["models"]):
            if raw["id"] in seen_ids:
                problems.append(
                    f"{name}: models[{m}].id: '{raw['id']}' is already declared in "
                    f"{seen_ids[raw['id']]}"
                )
                continue
            seen_ids[raw["id"]] = name
            models[raw["id"]] = _model_spec(raw, doc["family"], path)
    problems.extend(_clip(p) for p in _cache_problems(valid_docs))
    if problems:
        raise RegistryError("invalid model registry:\n" + "\n".join(f"  - {p}" for p in problems))
    return Registry(models=models, directory=directory)


# --- TypeScript generation ---------------------------------------------------------------

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

/** One exported `.pte` variant of a model for one backend. */
export type VariantDescriptor<B extends Backend = Backend> = FileSet & {{
  readonly backend: B;
  readonly quantization: Quantization;
  /** KV capacity the variant was exported with (prompt + generated tokens). */
  readonly maxContext: number;
  readonly minPlatform: MinPlatform;
  /** The encoder of each media capability of the model (one for each it declares). */
  readonly encoders?: {{ readonly [C in MediaCapability]?: EncoderDescriptor }};
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


def _ts(value: Any, indent: int) -> str:
    """Render a JSON-like value as a TypeScript literal (stable key order as given)."""
    pad = "  " * indent
    inner = "  " * (indent + 1)
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
        if v.encoders:
            variants[backend]["encoders"] = {
                kind: {"status": e.status, **_file_entries([e.file])[0]}
                for kind, e in sorted(v.encoders.items(), key=lambda item: MEDIA_CAPABILITIES.index(item[0]))
            }
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


def _union(values: Iterable[str]) -> str:
    return " | ".join(_ts_string(v) for v in values)


def generate_typescript(registry: Registry) -> str:
    """The content of ``registry.generated.ts``: types plus the ``models`` object.

    Deterministic: models are sorted by id, keys keep the registry's order.
    """
    defs = _schema()["$defs"]
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
        entries.append(
            f"  /** {_ts_comment(spec.name)} ({spec.family}); ships: {', '.join(spec.variants)}. */\n"
            f"  {_ts_key(model_id)}: {_ts(_descriptor(spec), 1)} as const satisfies "
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


def is_stale(registry: Registry, target: Path = GENERATED_TS) -> bool:
    """Whether ``target`` differs from what the registry generates now."""
    return not _matches(target, generate_typescript(registry))


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


def generated_files(registry: Registry, package_dir: Path = PACKAGE_DIR) -> dict[Path, str]:
    """Every file the registry and the backend catalog generate, with its content, placed in
    ``package_dir`` as in the npm package."""
    catalog = load_catalog()
    outputs = {
        GENERATED_TS: generate_typescript(registry),
        GENERATED_BACKENDS_TS: generate_backends_typescript(catalog),
        GENERATED_BACKENDS_H: generate_backends_header(catalog),
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

"""The registry's rules a JSON Schema cannot express, run on family documents the schema passed:
checksums that follow a file set's status, an encoder for each media capability, defaults that
are shipped variants for a platform their backend runs on, and file paths that cannot clash in
the downloader's cache."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rne_tools.backend_catalog import load_catalog
from rne_tools.models.layers import chunk_problem
from rne_tools.registry.specs import ASSISTANT_BACKENDS, MEDIA_CAPABILITIES

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
# Suffixes the SDK's downloader puts beside a file in the cache (packages/react-native-executorch/
# src/resources: `<path>.part` and `.range.part` while downloading, `.verified` marks, `.lock`
# files; `.tmp` kept free for it). No path segment may end in one, in any case, or a registry file
# could be taken for the downloader's own (tests/registry/test_registry.py checks the TypeScript's list).
RESERVED_SUFFIXES = (".part", ".verified", ".lock", ".tmp")


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


def _assistant_problems(model: dict[str, Any], name: str, where: str) -> Iterator[str]:
    """An assistant only where its backend exports the architecture's drafter, a .pte (another
    file than the variant's: ``cache_problems``), a verify length the export takes, checksums
    that follow its status, and published only with its variant (one revision serves both)."""
    backends = ASSISTANT_BACKENDS.get(model["architecture"], ())
    for v, variant in enumerate(model["variants"]):
        assistant = variant.get("assistant")
        if assistant is None:
            continue
        awhere = f"{where}.variants[{v}].assistant"
        if variant["backend"] not in backends:
            yield (
                f"{name}: {awhere}: the {variant['backend']} variant cannot carry an assistant: "
                + (
                    f"the '{model['architecture']}' drafter is exported for "
                    f"{', '.join(backends)} only (docs/design.md says what the others lack); "
                    "remove it"
                    if backends
                    else f"the '{model['architecture']}' architecture has no assistant drafter "
                    f"(architectures with one: {', '.join(sorted(ASSISTANT_BACKENDS))}); remove it"
                )
            )
        if not assistant["path"].endswith(".pte"):
            yield f"{name}: {awhere}.path: '{assistant['path']}' is not a .pte program"
        k, chunk = assistant["verify_tokens"], variant["export"]["max_chunk"]
        if k >= chunk:
            yield (
                f"{name}: {awhere}.verify_tokens: {k} must be below the variant's max_chunk "
                f"({chunk}): the assistant reads one position more of the sliding caches than "
                "the model does"
            )
        yield from _file_set_problems(
            {"status": assistant["status"], "files": [assistant]}, name, awhere, single=True
        )
        if assistant["status"] == "published" and variant["status"] != "published":
            yield (
                f"{name}: {awhere}.status: 'published' while its variant is not: publish the "
                "variant and its assistant together (tools/publish_models.py)"
            )


def cross_problems(doc: dict[str, Any], name: str) -> Iterator[str]:
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
        for backend in sorted({b for b in backends if not catalog.backend(b).takes(model["architecture"])}):
            yield (
                f"{name}: {where}.variants: backend '{backend}' does not export the "
                f"'{model['architecture']}' architecture ({catalog.source.name} lists "
                f"{', '.join(catalog.backend(backend).architectures)}); ship it on another backend"
            )
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
        yield from _assistant_problems(model, name, where)


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
            if (a := variant.get("assistant")) is not None:
                content = (a["status"], a.get("sha256"), a.get("size"))
                where = f"models[{m}].variants[{v}].assistant.path"
                yield folder, _CachedFile(name, model["id"], where, a["path"], content)


def cache_problems(docs: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[str]:
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

"""Record a publish in the model registry: checksums, sizes, revision, published status.

The family YAML files are edited in place with ruamel.yaml's round-trip mode, so comments, key
order, flow-style mappings and quoting survive. The new text is validated (``load_registry`` on
a scratch copy of the registry) before it atomically replaces the file, and the generated
TypeScript is rewritten from the updated registry.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from rne_tools import registry
from rne_tools.errors import RegistryError
from rne_tools.files import write_atomically
from rne_tools.paths import REGISTRY_DIR
from rne_tools.registry import codegen


@dataclass(frozen=True)
class PublishedFile:
    """A file as it now exists in the Hugging Face repository."""

    path: str
    sha256: str
    size: int


def _yaml() -> YAML:
    # Matches the registry's layout: 2-space mappings, list items indented under their key.
    y = YAML()
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def _record_files(file_set: Any, published: list[PublishedFile], where: str) -> None:
    by_path = {f.path: f for f in published}
    entries = file_set["files"]
    declared = [entry["path"] for entry in entries]
    if sorted(declared) != sorted(by_path):
        raise RegistryError(
            f"{where}: the registry declares files {declared} but {sorted(by_path)} were "
            "published; publish exactly the files the registry declares"
        )
    file_set["status"] = "published"
    for entry in entries:
        f = by_path[entry["path"]]
        entry["sha256"] = f.sha256
        entry["size"] = f.size


def _record_encoders(
    model: Any, variants: Mapping[str, Any], published: Sequence[PublishedFile], where: str
) -> None:
    by_path = {f.path: f for f in published}
    recorded = set()
    for variant in model["variants"]:
        backend = variant["backend"]
        for kind, entry in (variant.get("encoders") or {}).items():
            f = by_path.get(entry["path"])
            if f is None:
                if backend in variants:
                    raise RegistryError(
                        f"{where}.variants.{backend}.encoders.{kind}: {entry['path']} was not "
                        "published with its variant; publish a variant with all its encoders"
                    )
                continue
            entry["status"] = "published"
            entry["sha256"] = f.sha256
            entry["size"] = f.size
            recorded.add(f.path)
    extra = sorted(set(by_path) - recorded)
    if extra:
        raise RegistryError(
            f"{where}: no variant declares the encoders {extra} that were published; publish "
            "exactly the encoders the registry declares"
        )


def _record_assistants(
    by_backend: Mapping[str, Any], variants: Mapping[str, Any],
    published: Mapping[str, PublishedFile], where: str,
) -> None:
    """Each variant published now with an assistant entry gets its program recorded; an
    assistant is never published without its variant."""
    for backend in variants:
        entry = by_backend[backend].get("assistant")
        f = published.get(backend)
        if entry is None or f is None:
            if entry is not None or f is not None:
                raise RegistryError(
                    f"{where}.variants.{backend}.assistant: "
                    + ("was not published with its variant; publish a variant with its assistant"
                       if f is None else "the registry declares no assistant for this variant")
                )
            continue
        if entry["path"] != f.path:
            raise RegistryError(
                f"{where}.variants.{backend}.assistant.path: the registry declares "
                f"{entry['path']} but {f.path} was published"
            )
        entry["status"] = "published"
        entry["sha256"] = f.sha256
        entry["size"] = f.size
    extra = sorted(set(published) - set(variants))
    if extra:
        raise RegistryError(
            f"{where}: assistants of {extra} were published without their variants; publish "
            "each with its variant"
        )


def update_registry(
    model_id: str,
    revision: str,
    tokenizer: list[PublishedFile],
    variants: Mapping[str, list[PublishedFile]],
    registry_dir: Path = REGISTRY_DIR,
    ts_output: Path = codegen.GENERATED_TS,
    encoders: Sequence[PublishedFile] = (),
    assistants: Mapping[str, PublishedFile] | None = None,
) -> bool:
    """Mark ``variants`` (backend -> files), their ``encoders``, their ``assistants`` (backend ->
    the program with the assistant drafter) and the tokenizer of ``model_id`` published.

    Every encoder entry of the model whose path is among ``encoders`` records it, in whichever
    variant it sits: variants share an encoder by path, and the revision holds one file there.
    Each variant in ``variants`` must get all of its encoders. Sets the model's ``hf.revision``
    to ``revision``. Returns whether the YAML changed. The TypeScript is regenerated either
    way, so a stale generated file is repaired too. Raises ``RegistryError`` (and leaves every
    file untouched) if the result would not validate.
    """
    reg = registry.load_registry(registry_dir)
    spec = reg.model(model_id)
    path = spec.source_file
    original = path.read_text()
    y = _yaml()
    doc = y.load(original)
    model = next(m for m in doc["models"] if m["id"] == model_id)
    name = path.name
    model["hf"]["revision"] = revision
    _record_files(model["tokenizer"], tokenizer, f"{name}: {model_id}.tokenizer")
    by_backend = {v["backend"]: v for v in model["variants"]}
    for backend, files in variants.items():
        if backend not in by_backend:
            raise RegistryError(f"{name}: model '{model_id}' has no '{backend}' variant")
        _record_files(by_backend[backend], files, f"{name}: {model_id}.variants.{backend}")
    _record_encoders(model, variants, encoders, f"{name}: {model_id}")
    _record_assistants(by_backend, variants, assistants or {}, f"{name}: {model_id}")
    out = io.StringIO()
    y.dump(doc, out)
    text = out.getvalue()

    changed = text != original
    if changed:
        _validate(registry_dir, name, text)
        write_atomically(path, text)
    codegen.write_typescript(registry.load_registry(registry_dir), ts_output)
    return changed


def _validate(registry_dir: Path, name: str, text: str) -> None:
    """Load the registry with ``name`` replaced by ``text``, in a scratch directory."""
    with tempfile.TemporaryDirectory(prefix="rne-registry-") as scratch:
        for f in registry.registry_files(registry_dir):
            shutil.copy2(f, Path(scratch) / f.name)
        (Path(scratch) / name).write_text(text)
        registry.load_registry(Path(scratch))



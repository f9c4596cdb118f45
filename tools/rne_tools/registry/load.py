"""Loading the registry: each family file read strictly, checked against the schema and the
cross-file rules, and turned into the records of ``rne_tools.registry.specs``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rne_tools import strict_yaml
from rne_tools.backend_catalog import CATALOG_FILE
from rne_tools.errors import RegistryError
from rne_tools.paths import REGISTRY_DIR
from rne_tools.registry.checks import cache_problems, cross_problems
from rne_tools.registry.problems import clip, name_models
from rne_tools.registry.schema import Validator, schema, schema_problems
from rne_tools.registry.specs import (
    AssistantSpec,
    EncoderSpec,
    FileSet,
    FileSpec,
    ModelSpec,
    Registry,
    Status,
    VariantSpec,
)


def _file_set(raw: dict[str, Any]) -> tuple[Status, tuple[FileSpec, ...]]:
    files = tuple(FileSpec(f["path"], f.get("sha256"), f.get("size")) for f in raw["files"])
    return raw["status"], files


def _assistant_spec(raw: dict[str, Any] | None) -> AssistantSpec | None:
    if raw is None:
        return None
    file = FileSpec(raw["path"], raw.get("sha256"), raw.get("size"))
    return AssistantSpec(
        raw["status"], file, raw["source"]["hf_repo"], raw["verify_tokens"],
        raw.get("peak_memory_bytes"),
    )


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
            peak_memory_bytes=v.get("peak_memory_bytes"),
            assistant=_assistant_spec(v.get("assistant")),
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
    validator = Validator(schema())
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
            problems.append(clip(f"{name}: {exc}"))
            continue
        except strict_yaml.StrictYamlError as exc:  # one line naming the field and the line
            lead = "not valid YAML: " if exc.invalid else ""
            problems.append(clip(f"{name}: {lead}{exc}"))
            continue
        invalid = schema_problems(doc, name, validator)
        if invalid:
            problems.extend(name_models(invalid, doc, name))
            continue
        valid_docs.append((name, doc))
        problems.extend(name_models(cross_problems(doc, name), doc, name))
        for m, raw in enumerate(doc["models"]):
            if raw["id"] in seen_ids:
                problems.append(
                    f"{name}: models[{m}].id: '{raw['id']}' is already declared in "
                    f"{seen_ids[raw['id']]}"
                )
                continue
            seen_ids[raw["id"]] = name
            models[raw["id"]] = _model_spec(raw, doc["family"], path)
    problems.extend(clip(p) for p in cache_problems(valid_docs))
    if problems:
        raise RegistryError("invalid model registry:\n" + "\n".join(f"  - {p}" for p in problems))
    return Registry(models=models, directory=directory)

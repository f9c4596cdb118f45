"""The model registry: ``model-registry/*.yaml``, one file per model family.

It is the single source of truth for models and their per-backend variants. This package loads
and validates it and generates what the npm package derives from it, one module each:

- ``specs``: the loaded registry's records (``Registry``, ``ModelSpec``, ``VariantSpec``, ...);
- ``schema``: the JSON Schema and its validator; ``checks``: the rules a schema cannot express;
  ``problems``: how a problem is worded; ``load``: reading the files through all of them;
- ``codegen``: the TypeScript ``models`` object, and from the backend catalog the TypeScript
  backend tables and the C++ header of the native seam.

Every problem is reported as ``<file>: <field path>: <what is wrong>`` on one line, so a
maintainer can go straight to the line. The files are read by ``rne_tools.strict_yaml`` (YAML 1.2
core, bounded, regular files only).

Loading is what most callers need, so its API is importable from the package itself.
"""

from rne_tools.registry.load import load_registry, registry_files
from rne_tools.registry.schema import revision_pattern
from rne_tools.registry.specs import (
    AssistantSpec,
    EncoderSpec,
    FileSet,
    FileSpec,
    ModelSpec,
    Registry,
    VariantSpec,
)

__all__ = [
    "AssistantSpec",
    "EncoderSpec",
    "FileSet",
    "FileSpec",
    "ModelSpec",
    "Registry",
    "VariantSpec",
    "load_registry",
    "registry_files",
    "revision_pattern",
]

"""The registry's JSON Schema (``model-registry/schema.json``) and the validator that applies it.

Its backend enum comes from the backend catalog, its architecture enum from the model modules and
its media capabilities from ``MEDIA_CAPABILITIES``, so none is listed twice. Patterns must match
the whole value (a trailing newline is not "the end"); numbers are finite and integers exact in
JavaScript.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import jsonschema.validators

from rne_tools import strict_yaml
from rne_tools.backend_catalog import load_catalog
from rne_tools.models import ARCHITECTURES
from rne_tools.paths import REGISTRY_DIR
from rne_tools.registry.problems import clip, short
from rne_tools.registry.specs import MEDIA_CAPABILITIES

SCHEMA_FILE = "schema.json"


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


Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _fullmatch_pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _integer, "number": _finite_number}
    ),
)


def schema() -> dict[str, Any]:
    """The registry's JSON Schema, its backend enum filled in from the backend catalog, its
    architecture enum from the model modules and its media capabilities (a capability, and the
    key of its encoder) from ``MEDIA_CAPABILITIES``."""
    doc = json.loads((REGISTRY_DIR / SCHEMA_FILE).read_text())
    doc["$defs"]["backend"]["enum"] = list(load_catalog().names())
    doc["$defs"]["architecture"]["enum"] = sorted(ARCHITECTURES)
    model = doc["$defs"]["model"]["properties"]
    model["capabilities"]["items"]["enum"] += MEDIA_CAPABILITIES
    variant = doc["$defs"]["variant"]["properties"]
    encoders = {kind: {"$ref": "#/$defs/encoder"} for kind in MEDIA_CAPABILITIES}
    variant["encoders"]["properties"] = encoders
    return doc


def revision_pattern() -> str:
    """The schema's rule for a pinned revision (a 40-hex commit or a release tag)."""
    return schema()["$defs"]["revision"]["pattern"]


def schema_problems(doc: Any, name: str, validator: jsonschema.protocols.Validator) -> list[str]:
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
            message = message.replace(repr(error.instance), short(error.instance))
        where = strict_yaml.field_path(error.absolute_path)
        problems.append(clip(f"{name}: {where}: {message}{hint}"))
    return problems

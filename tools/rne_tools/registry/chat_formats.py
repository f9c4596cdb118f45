"""Chat formats' syntax (``model-registry/chat_formats/<format>.yaml``): the markers a chat
template writes, declared once for TypeScript and C++. ``codegen`` writes both from what this
loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rne_tools import strict_yaml
from rne_tools.errors import RegistryError
from rne_tools.paths import REGISTRY_DIR

CHAT_FORMATS_DIR = REGISTRY_DIR / "chat_formats"

# Every field a format declares: section -> its keys (each a non-empty text, `tokens` a list).
FIELDS: dict[str, tuple[str, ...]] = {
    "tool_call": ("open", "close", "quote", "response_open"),
    "thought": ("open", "close", "tokens"),
    "media_placeholders": ("image", "audio"),
}


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _problems(doc: Any, name: str) -> list[str]:
    if not isinstance(doc, dict):
        return [f"{name}: must be a mapping of {', '.join(FIELDS)}"]
    problems = [f"{name}: {key}: unknown section" for key in doc if key not in FIELDS]
    for section, keys in FIELDS.items():
        body = doc.get(section)
        if not isinstance(body, dict):
            problems.append(f"{name}: {section}: missing, or not a mapping of {', '.join(keys)}")
            continue
        problems += [f"{name}: {section}.{key}: unknown key" for key in body if key not in keys]
        for key in keys:
            value = body.get(key)
            good = (
                isinstance(value, list) and value != [] and all(map(_text, value))
                if key == "tokens"
                else _text(value)
            )
            if not good:
                what = "a non-empty list of texts" if key == "tokens" else "a non-empty text"
                problems.append(f"{name}: {section}.{key}: must be {what}, got {value!r}")
    return problems


def parse_chat_format(text: str, source: Path) -> dict[str, dict[str, Any]]:
    """The syntax declared in ``text`` (the content of ``source``); ``RegistryError`` lists
    every problem."""
    name = f"{source.parent.name}/{source.name}"
    try:
        doc = strict_yaml.load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"invalid chat format:\n  - {name}: not valid YAML: {exc}") from None
    problems = _problems(doc, name)
    if problems:
        raise RegistryError("invalid chat format:\n" + "\n".join(f"  - {p}" for p in problems))
    return doc


def load_chat_format(format_name: str, directory: Path = CHAT_FORMATS_DIR) -> dict[str, dict[str, Any]]:
    path = directory / f"{format_name}.yaml"
    return parse_chat_format(strict_yaml.read_file(path), path)

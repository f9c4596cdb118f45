"""Edits of a copied registry (the ``registry_copy`` fixture), and the error loading it gives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rne_tools import registry
from rne_tools.errors import RegistryError


def edit(registry_copy: Path, change: Callable[[dict[str, Any]], None], name: str = "gemma4.yaml") -> None:
    """Applies ``change`` to the parsed ``name`` and writes it back."""
    path = registry_copy / name
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def load_error(registry_copy: Path) -> str:
    """The RegistryError loading ``registry_copy`` raises; fails the test if it loads."""
    with pytest.raises(RegistryError) as info:
        registry.load_registry(registry_copy)
    return str(info.value)

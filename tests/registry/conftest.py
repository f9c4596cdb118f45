"""Fixtures of the registry tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rne_tools.paths import REGISTRY_DIR


@pytest.fixture
def reg_dir(tmp_path: Path) -> Path:
    """A writable copy of the real registry."""
    target = tmp_path / "model-registry"
    shutil.copytree(REGISTRY_DIR, target)
    return target

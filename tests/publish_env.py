"""The test Hub's token and the environment of a CLI run against it (tests/hub_server.py)."""

from __future__ import annotations

import os
from pathlib import Path

TOKEN = "hf_test_token_5b0c1e77d2"  # the only token the test Hub accepts


def hub_env(tmp_path: Path, token: str | None = TOKEN) -> dict[str, str]:
    """The environment of a CLI run against the test Hub: no Hugging Face setting or stored login
    of the machine leaks in; plain LFS uploads (the server has no Xet)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
    env.update(HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_XET="1")
    if token is not None:
        env["HF_TOKEN"] = token
    return env


def registry_files(reg: Path) -> dict[str, bytes]:
    """Every file of a registry folder (its subfolders too) by relative path, to show that
    something left it unchanged."""
    return {p.relative_to(reg).as_posix(): p.read_bytes() for p in sorted(reg.rglob("*"))
            if p.is_file()}

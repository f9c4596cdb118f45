"""The pinned ExecuTorch source: ``third-party/executorch.lock.json``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from rne_tools.binaries.errors import BuildError
from rne_tools.paths import REPO_ROOT

LOCK_PATH = REPO_ROOT / "third-party" / "executorch.lock.json"
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class SourceLock:
    """Which ExecuTorch to build: the repository and the exact commit (the tag is a label)."""

    repository: str
    tag: str
    commit: str
    wheel: str

    @property
    def short(self) -> str:
        return self.commit[:12]


def load_lock(path: Path = LOCK_PATH) -> SourceLock:
    """Read and validate the lock file."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise BuildError(f"lock file {path} is missing: restore it from git") from None
    except json.JSONDecodeError as e:
        raise BuildError(f"lock file {path} is not valid JSON: {e}") from None
    missing = [k for k in ("repository", "tag", "commit", "wheel") if not data.get(k)]
    if missing:
        raise BuildError(f"lock file {path} lacks {', '.join(missing)}")
    if not _SHA_RE.match(data["commit"]):
        raise BuildError(
            f"lock file {path}: commit {data['commit']!r} is not a full 40-hex-digit git SHA; "
            "pin an exact commit (a tag can move)"
        )
    return SourceLock(data["repository"], data["tag"], data["commit"], data["wheel"])

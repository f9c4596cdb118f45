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
class PinnedSource:
    """One more source tree at an exact commit: a submodule (``name`` is its path in the
    ExecuTorch tree) or an extra source such as ``shaderc`` (``shaderc/third_party/x`` nests)."""

    name: str
    repository: str
    commit: str


@dataclass(frozen=True)
class SourceLock:
    """Which ExecuTorch to build: the repository and the exact commit (the tag is a label).

    ``wheel_commit`` is the commit of the exporter wheel (``wheel``); ``submodules`` and
    ``extra_sources`` are what a ``--platform linux`` build writes out of local mirrors.
    """

    repository: str
    tag: str
    commit: str
    wheel: str
    wheel_commit: str = ""
    submodules: tuple[PinnedSource, ...] = ()
    extra_sources: tuple[PinnedSource, ...] = ()

    @property
    def short(self) -> str:
        return self.commit[:12]


def read_pin_file(path: Path, what: str) -> dict:
    """The JSON object of a committed pin file (``what``: "lock file", "wheel pin"), or a
    BuildError saying it is missing or malformed."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise BuildError(f"{what} {path} is missing: restore it from git") from None
    except json.JSONDecodeError as e:
        raise BuildError(f"{what} {path} is not valid JSON: {e}") from None
    return data


def load_lock(path: Path = LOCK_PATH) -> SourceLock:
    """Read and validate the lock file."""
    data = read_pin_file(path, "lock file")
    missing = [k for k in ("repository", "tag", "commit", "wheel") if not data.get(k)]
    if missing:
        raise BuildError(f"lock file {path} lacks {', '.join(missing)}")
    if not _SHA_RE.match(data["commit"]):
        raise BuildError(
            f"lock file {path}: commit {data['commit']!r} is not a full 40-hex-digit git SHA; "
            "pin an exact commit (a tag can move)"
        )
    pinned = []
    for key, name_key in (("submodules", "path"), ("extra_sources", "name")):
        entries = []
        for entry in data.get(key, []):
            if not entry.get(name_key) or not entry.get("repository") or \
                    not _SHA_RE.match(entry.get("commit", "")):
                raise BuildError(f"lock file {path}: {key} entry {entry!r} needs {name_key}, "
                                 "repository and a full 40-hex-digit commit")
            entries.append(PinnedSource(entry[name_key], entry["repository"], entry["commit"]))
        pinned.append(tuple(entries))
    return SourceLock(data["repository"], data["tag"], data["commit"], data["wheel"],
                      data.get("wheel_commit", ""), *pinned)

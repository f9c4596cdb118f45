"""Write one commit of a local git mirror out as a plain source tree (no ``.git``).

Mirror snapshots may lack a few blobs (large binaries such as GIFs or vendored tokenizer files
an upstream repository keeps outside the normal object store). ``git archive`` and ``git
checkout`` stop at the first missing blob, so the tree is written blob by blob from
``git cat-file --batch`` and missing blobs are returned to the caller, which decides whether
they matter (the caller records them; see ``source_cache.py``).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rne_tools.binaries.errors import BuildError


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    sha: str
    path: str


def _git(mirror: Path, *args: str, data: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", "--git-dir", str(mirror), *args], input=data,
                          capture_output=True)
    if proc.returncode != 0:
        raise BuildError(f"git {' '.join(args[:3])} in {mirror} failed: "
                         f"{proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def has_commit(mirror: Path, commit: str) -> bool:
    """Whether ``mirror`` (a git directory) holds ``commit``."""
    proc = subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True)
    return proc.returncode == 0


def list_tree(mirror: Path, commit: str) -> list[TreeEntry]:
    """Every blob and symlink of ``commit`` (submodule entries excluded)."""
    out = _git(mirror, "ls-tree", "-r", "-z", commit)
    entries = []
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, kind, sha = meta.decode().split()
        if kind == "blob":
            entries.append(TreeEntry(mode, sha, path.decode()))
    return entries


def write_tree(mirror: Path, commit: str, dest: Path) -> list[str]:
    """Write ``commit`` of ``mirror`` under ``dest``; return the paths whose blobs are missing."""
    entries = list_tree(mirror, commit)
    proc = subprocess.Popen(["git", "--git-dir", str(mirror), "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    missing: list[str] = []
    try:
        for entry in entries:
            proc.stdin.write(entry.sha.encode() + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) == 2 and header[1] == b"missing":
                missing.append(entry.path)
                continue
            size = int(header[2])
            body = proc.stdout.read(size)
            proc.stdout.read(1)  # the newline after each object
            target = dest / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            if entry.mode == "120000":
                os.symlink(body.decode(), target)
            else:
                target.write_bytes(body)
                if entry.mode == "100755":
                    target.chmod(0o755)
    finally:
        proc.stdin.close()
        proc.wait()
    return missing

"""The ExecuTorch source (and the sources it needs) in a cache outside the work tree.

``--platform linux`` builds from plain source trees written out of local git mirrors
(``--source-mirror``) into ``<cache>/sources/`` once; every later run, and every fresh clone
on the same machine (CI), finds them there without the flag. ``<cache>`` is
``$RNE_CACHE_DIR`` or ``~/.cache/rne``. Each tree gets a ``source.json`` stamp (written last,
so a half-written tree is never taken for a finished one) naming its commits and any blob the
mirror lacked.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rne_tools.binaries.errors import BuildError
from rne_tools.binaries.lock import PinnedSource, SourceLock
from rne_tools.binaries.source_tree import has_commit, write_tree

STAMP = "source.json"


@dataclass(frozen=True)
class SourceLayout:
    """Where each locked source lives under the cache root."""

    root: Path
    lock: SourceLock

    @property
    def executorch(self) -> Path:
        # CMake insists that ExecuTorch's source directory is named `executorch`.
        return self.root / "sources" / f"executorch-{self.lock.short}" / "executorch"

    def extra(self, name: str) -> Path:
        """A top-level extra source (``fmt``, ``shaderc``); nested ones live inside it."""
        top = name.split("/", 1)[0]
        source = next(s for s in self.lock.extra_sources if s.name == top)
        return self.root / "sources" / f"{top}-{source.commit[:12]}"

    def trees(self) -> list[tuple[Path, Path, list[tuple[str, PinnedSource]]]]:
        """Each cached tree as (where it is written, where its stamp lives, what it holds)."""
        lock = self.lock
        et_sources = [("", PinnedSource("executorch", lock.repository, lock.commit))]
        et_sources += [(s.name, s) for s in lock.submodules]
        trees = [(self.executorch, self.executorch.parent, et_sources)]
        for top in (s for s in lock.extra_sources if "/" not in s.name):
            nested = [(s.name.split("/", 1)[1], s) for s in lock.extra_sources
                      if s.name.startswith(top.name + "/")]
            trees.append((self.extra(top.name), self.extra(top.name), [("", top), *nested]))
        return trees

    def is_complete(self) -> bool:
        """Every tree is written and its stamp names exactly the locked sources (a tree written
        for an earlier lock, e.g. before a submodule was added to it, is not complete)."""
        return all(_stamp_matches(stamp_dir, sources) for _, stamp_dir, sources in self.trees())

    def missing_message(self) -> str:
        return (f"the ExecuTorch source for {self.lock.short} is not in {self.root / 'sources'}; "
                "get it once with `.venv/bin/python tools/build_binaries.py --platform linux "
                "--source-mirror DIR` (DIR: a directory of git mirrors named owner+name/repo, "
                "or one git directory per flag)")


def _mirror_name(repository: str) -> str:
    """``https://github.com/owner/name.git`` -> ``owner+name``."""
    parts = repository.rstrip("/").removesuffix(".git").split("/")
    return f"{parts[-2]}+{parts[-1]}"


def find_mirror(mirrors: Sequence[Path], source: PinnedSource) -> Path:
    """The first mirror that holds ``source.commit``; a clear error naming what was searched."""
    name = _mirror_name(source.repository)
    candidates: list[Path] = []
    for m in mirrors:
        candidates += [m / name / "repo", m / name, m]
    for c in candidates:
        if (c / "objects").is_dir() and has_commit(c, source.commit):
            return c
    raise BuildError(
        f"no mirror holds {source.repository} at {source.commit}; looked in "
        f"{', '.join(str(m) for m in mirrors)} (as {name}/repo, {name}, and the directory itself). "
        f"Mirror it with `git clone --mirror {source.repository}` and pass --source-mirror"
    )


def _write(mirrors: Sequence[Path], sources: Sequence[tuple[str, PinnedSource]], dest: Path) -> dict:
    """Write every ``(relative path, source)`` under ``dest``; return the stamp's content."""
    record: dict = {"sources": [], "missing_blobs": {}}
    for rel, source in sources:
        mirror = find_mirror(mirrors, source)
        missing = write_tree(mirror, source.commit, dest / rel if rel else dest)
        record["sources"].append({"path": rel or ".", "repository": source.repository,
                                  "commit": source.commit})
        if missing:
            record["missing_blobs"][rel or "."] = missing
    return record


def _read_stamp(stamp_dir: Path) -> dict | None:
    try:
        return json.loads((stamp_dir / STAMP).read_text())
    except (OSError, ValueError):
        return None


def _written(record: dict | None) -> set[tuple[str, str]] | None:
    return None if record is None else {(s["path"], s["commit"]) for s in record.get("sources", [])}


def _locked(sources: Sequence[tuple[str, PinnedSource]]) -> set[tuple[str, str]]:
    return {(rel or ".", source.commit) for rel, source in sources}


def _stamp_matches(stamp_dir: Path, sources: Sequence[tuple[str, PinnedSource]]) -> bool:
    return _written(_read_stamp(stamp_dir)) == _locked(sources)


def _populate(dest: Path, stamp_dir: Path, mirrors: Sequence[Path],
              sources: Sequence[tuple[str, PinnedSource]]) -> None:
    record = _read_stamp(stamp_dir)
    written, locked = _written(record), _locked(sources)
    if written == locked:
        return
    if record is not None and written < locked:
        # The lock only added sources (a submodule the build turned out to need): write just
        # those, so the rest of the tree keeps its files and timestamps and the build stays
        # incremental. A stamp that names a source the lock lacks, or another commit, is not.
        added = [(rel, s) for rel, s in sources if (rel or ".", s.commit) not in written]
        more = _write(mirrors, added, dest)
        record["sources"] += more["sources"]
        record["missing_blobs"].update(more["missing_blobs"])
        (stamp_dir / STAMP).write_text(json.dumps(record, indent=2) + "\n")
        return
    if stamp_dir.exists():  # an interrupted attempt, or a tree written for another lock
        shutil.rmtree(stamp_dir)
    record = _write(mirrors, sources, dest)
    (stamp_dir / STAMP).write_text(json.dumps(record, indent=2) + "\n")


def populate(layout: SourceLayout, mirrors: Sequence[Path]) -> list[str]:
    """Write every locked source that is not cached yet; return notes on missing blobs."""
    trees = layout.trees()
    for dest, stamp_dir, sources in trees:
        _populate(dest, stamp_dir, mirrors, sources)
    notes = []
    for stamp in (stamp_dir / STAMP for _, stamp_dir, _ in trees):
        for rel, paths in json.loads(stamp.read_text())["missing_blobs"].items():
            notes.append(f"{stamp.parent.name}/{rel}: {len(paths)} blob(s) absent from the mirror "
                         f"and not written ({', '.join(paths[:3])}{', ...' if len(paths) > 3 else ''})")
    return notes

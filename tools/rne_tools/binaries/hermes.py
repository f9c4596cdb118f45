"""Hermes from pinned source, for the host check of the package's JavaScript.

``third-party/hermes.lock.json`` pins the Hermes that the repository's React Native runs. Its
source is written once out of a local git mirror (``--source-mirror``) into
``<cache>/sources/hermes-<commit12>/``, stamped like the ExecuTorch source (source_cache.py), and
only what a JSI host needs is built from it into ``<cache>/hermes/<commit12>-release/``:
``libhermesvm.so`` (the VM, its JSI implementation and compiler) and ``hermesc`` (source to
bytecode). ``build.json`` there, written last, says the build is complete (and how long the run that
completed it took: a resumed build times only its last part).
``<cache>`` is ``$RNE_CACHE_DIR`` or ``~/.cache/rne``; nothing in the repository names it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rne_tools.binaries.errors import BuildError
from rne_tools.binaries.lock import PinnedSource, read_pin_file
from rne_tools.binaries.source_cache import _populate
from rne_tools.paths import REPO_ROOT

LOCK_PATH = REPO_ROOT / "third-party" / "hermes.lock.json"
STAMP = "build.json"
TARGETS = ("hermesvm", "hermesc")
# Release, without what a host that runs bytecode does not use (the debugger, Intl, the tests).
CONFIGURE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DHERMES_ENABLE_TEST_SUITE=OFF",
                   "-DHERMES_ENABLE_DEBUGGER=OFF", "-DHERMES_ENABLE_INTL=OFF")
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class HermesLock:
    repository: str
    tag: str
    commit: str
    react_native: str
    bytecode_version: int

    @property
    def short(self) -> str:
        return self.commit[:12]


def load_hermes_lock(path: Path = LOCK_PATH) -> HermesLock:
    data = read_pin_file(path, "lock file")
    missing = [k for k in ("repository", "tag", "commit", "react_native", "bytecode_version")
               if not data.get(k)]
    if missing:
        raise BuildError(f"lock file {path} lacks {', '.join(missing)}")
    if not _SHA_RE.match(data["commit"]):
        raise BuildError(f"lock file {path}: commit {data['commit']!r} is not a full 40-hex-digit "
                         "git SHA; pin an exact commit (a tag can move)")
    return HermesLock(data["repository"], data["tag"], data["commit"], data["react_native"],
                      int(data["bytecode_version"]))


@dataclass(frozen=True)
class HermesLayout:
    """Where the pinned Hermes's source and build live under the cache root."""

    root: Path
    lock: HermesLock

    @property
    def source(self) -> Path:
        return self.root / "sources" / f"hermes-{self.lock.short}"

    @property
    def build(self) -> Path:
        return self.root / "hermes" / f"{self.lock.short}-release"

    @property
    def vm_library(self) -> Path:
        return self.build / "lib" / "libhermesvm.so"

    @property
    def hermesc(self) -> Path:
        return self.build / "bin" / "hermesc"

    def built(self) -> dict | None:
        """The build's stamp when it is complete for the locked commit, else None."""
        try:
            stamp = json.loads((self.build / STAMP).read_text())
        except (OSError, ValueError):
            return None
        if stamp.get("commit") != self.lock.commit or not self.vm_library.is_file() \
                or not self.hermesc.is_file():
            return None
        return stamp

    def missing_message(self) -> str:
        return (f"Hermes {self.lock.tag} is not built in {self.build}; build it once with "
                "`.venv/bin/python tools/build_hermes.py --source-mirror DIR` (DIR: a git mirror "
                "of facebook/hermes, or a directory of mirrors named owner+name/repo)")


def populate_source(layout: HermesLayout, mirrors: Sequence[Path]) -> None:
    """Write the locked source into the cache unless it is there (stamped) already."""
    source = PinnedSource("hermes", layout.lock.repository, layout.lock.commit)
    stamped = (layout.source / "source.json").is_file()
    if not stamped and not mirrors:
        raise BuildError(f"the Hermes source for {layout.lock.short} is not in {layout.source}: "
                         "pass --source-mirror DIR (a git mirror of facebook/hermes)")
    _populate(layout.source, layout.source, mirrors, [("", source)])


def bytecode_version(hermesc: Path) -> int:
    """The HBC version ``hermesc -version`` reports."""
    out = subprocess.run([str(hermesc), "-version"], capture_output=True, text=True, check=False)
    found = re.search(r"HBC bytecode version:\s*(\d+)", out.stdout)
    if not found:
        raise BuildError(f"{hermesc} -version reports no bytecode version:\n{out.stdout}{out.stderr}")
    return int(found.group(1))


def _run(argv: Sequence[str], log: Path, what: str) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        hint = ("\n(Hermes needs ICU: `apt-get install -y libicu-dev`)"
                if "Unable to find ICU" in tail else "")
        raise BuildError(f"{what} failed (exit {code}); log: {log}\n{tail}{hint}")


def build(layout: HermesLayout, *, cmake: Path, ninja: Path, jobs: int, nice: int) -> dict:
    """Configure and build ``TARGETS`` (incrementally), check the bytecode version, stamp."""
    if (stamp := layout.built()) is not None:
        return stamp
    for tool in ("c++", "cc"):
        if shutil.which(tool) is None:
            raise BuildError(f"no {tool} on PATH: install a C/C++ toolchain (`apt-get install -y "
                             "build-essential`)")
    layout.build.mkdir(parents=True, exist_ok=True)
    log = layout.build / "build.log"
    niced = ("nice", "-n", str(nice))
    start = time.monotonic()
    if not (layout.build / "CMakeCache.txt").is_file():
        _run((*niced, str(cmake), "-S", str(layout.source), "-B", str(layout.build), "-G", "Ninja",
              f"-DCMAKE_MAKE_PROGRAM={ninja}", *CONFIGURE_FLAGS), log, "configuring Hermes")
    _run((*niced, str(cmake), "--build", str(layout.build), "-j", str(jobs), "--target", *TARGETS),
         log, "building Hermes")
    seconds = round(time.monotonic() - start)
    version = bytecode_version(layout.hermesc)
    if version != layout.lock.bytecode_version:
        raise BuildError(f"the built hermesc emits bytecode version {version}, the lock "
                         f"({LOCK_PATH.name}) says {layout.lock.bytecode_version}: the pinned commit "
                         "is not the Hermes React Native's hermes-compiler is")
    stamp = {"commit": layout.lock.commit, "tag": layout.lock.tag, "targets": list(TARGETS),
             "configure_flags": list(CONFIGURE_FLAGS), "jobs": jobs, "nice": nice,
             "last_run_seconds": seconds, "bytecode_version": version}
    (layout.build / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
    return stamp

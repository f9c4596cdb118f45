"""Per-platform manifests: what went into the staged binaries, and their hashes.

``third-party/<platform>/manifest.json`` (``build/host/manifest.json`` for the host build) has
one entry per build (``ios``, an Android ABI, ``host``): the ExecuTorch source (repository,
tag, commit), the patch series with sha256s, the CMake flags (placeholders, no machine paths),
the tool versions preflight found, and sha256 + size of every staged file. No timestamps: a
reproducible rebuild writes an identical manifest. ``verify_manifest`` re-hashes the files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from rne_tools.binaries.errors import ManifestError
from rne_tools.files import write_atomically
from rne_tools.hashing import sha256_file

SCHEMA = 1


def _files_under(root: Path, entry: str) -> list[Path]:
    path = root / entry
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() or p.is_symlink())
    return []


def artifact_records(root: Path, staged: tuple[str, ...] | list[str]) -> list[dict]:
    """sha256 and size of every file under each staged entry (file or directory) of ``root``."""
    records = []
    for entry in staged:
        files = _files_under(root, entry)
        if not files:
            raise ManifestError(f"staged artifact {root / entry} does not exist; the build did not stage it")
        for f in files:
            if f.is_symlink():
                # Frameworks may contain symlinks; record the link, not its target's bytes.
                records.append({"path": f.relative_to(root).as_posix(), "symlink": os.readlink(f)})
                continue
            records.append({
                "path": f.relative_to(root).as_posix(),
                "size": f.stat().st_size,
                "sha256": sha256_file(f),
            })
    return records


_ARTIFACT_TYPES = {"EXECUTABLE", "SHARED_LIBRARY", "STATIC_LIBRARY", "MODULE_LIBRARY"}


def cmake_build_artifacts(build_dir: Path) -> list[str]:
    """Paths (relative to ``build_dir``) of every executable and library its targets produce.

    Read from the reply of CMake's file API (a ``codemodel-v2`` query placed before configure),
    so the list follows the project instead of being maintained by hand.
    """
    reply = build_dir / ".cmake" / "api" / "v1" / "reply"
    indexes = sorted(reply.glob("index-*.json")) if reply.is_dir() else []
    if not indexes:
        raise ManifestError(
            f"no CMake file-API reply in {reply}: the plan must create the codemodel-v2 query "
            "before configuring"
        )
    index = json.loads(indexes[-1].read_text())
    codemodel = next(
        (r for r in index["reply"].values() if isinstance(r, dict) and r.get("kind") == "codemodel"),
        None,
    )
    if codemodel is None:
        raise ManifestError(f"the CMake file-API reply in {reply} has no codemodel")
    model = json.loads((reply / codemodel["jsonFile"]).read_text())
    paths = set()
    for config in model["configurations"]:
        for target in config["targets"]:
            info = json.loads((reply / target["jsonFile"]).read_text())
            if info.get("type") in _ARTIFACT_TYPES:
                for artifact in info.get("artifacts", []):
                    p = Path(artifact["path"])
                    if not p.is_absolute():
                        paths.add(p.as_posix())
    return sorted(paths)


def load_manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(
            f"no manifest at {path}: build the platform first "
            "(`python tools/build_binaries.py --platform ...`)"
        ) from None
    except json.JSONDecodeError as e:
        raise ManifestError(f"manifest {path} is not valid JSON ({e}); rebuild to regenerate it") from None
    if data.get("schema") != SCHEMA or not isinstance(data.get("builds"), dict):
        raise ManifestError(f"manifest {path} is not a schema-{SCHEMA} build manifest")
    return data


def write_manifest(path: Path, platform: str, build: str, entry: dict) -> dict:
    """Set ``builds[build] = entry`` in the manifest at ``path`` (keeping other builds).

    Written to a temporary file and renamed, so a reader never sees half a manifest.
    """
    data = {"schema": SCHEMA, "platform": platform, "builds": {}}
    if path.exists():
        old = load_manifest(path)
        if old.get("platform") == platform:
            data["builds"] = old["builds"]
    data["builds"][build] = entry
    data["builds"] = dict(sorted(data["builds"].items()))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return data


@dataclass
class VerifyResult:
    manifest: Path
    checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_manifest(path: Path) -> VerifyResult:
    """Check every recorded artifact (exists, size, sha256) and flag unrecorded files."""
    data = load_manifest(path)
    root = path.parent
    result = VerifyResult(path)
    for build, entry in data["builds"].items():
        recorded = {a["path"]: a for a in entry.get("artifacts", [])}
        for rel, rec in recorded.items():
            f = root / rel
            result.checked += 1
            if "symlink" in rec:
                if not f.is_symlink() or os.readlink(f) != rec["symlink"]:
                    result.problems.append(f"{build}: {rel}: expected a symlink to {rec['symlink']}")
                continue
            if not f.is_file():
                result.problems.append(f"{build}: {rel}: missing")
            elif f.stat().st_size != rec["size"]:
                result.problems.append(
                    f"{build}: {rel}: size {f.stat().st_size} != recorded {rec['size']}"
                )
            elif sha256_file(f) != rec["sha256"]:
                result.problems.append(f"{build}: {rel}: sha256 differs from the manifest (modified)")
        for staged in entry.get("staged", []):
            for f in _files_under(root, staged):
                rel = f.relative_to(root).as_posix()
                if rel not in recorded:
                    result.problems.append(f"{build}: {rel}: not recorded in the manifest (added)")
    return result

"""Release artifacts of the staged native binaries, and the package's lock of them.

``tools/build_binaries.py --platform ios|android`` stages a directory (``third-party/ios``,
``third-party/android``) with its ``manifest.json``. A release turns each verified staging into
zip artifacts, one per backend set and (Android) per ABI:

- ``ios``: ``ExecuTorch.xcframework/``, ``mlx.metallib`` where MLX is in;
- ``android-<abi>``: ``<abi>/libexecutorch.so`` and ``include/`` (the headers android/CMakeLists.txt
  compiles against), so that one unpacked artifact is a complete ``RNE_THIRD_PARTY_DIR`` for its ABI.

Every artifact also holds ``rne-binaries.json``: package version, platform, ABI, backends, the
ExecuTorch source, the component size table and the sha256 of every file. Backend sets: ``all``
(the platform's GPU delegate, Vulkan or MLX, with XNNPACK) and ``cpu`` (XNNPACK only), read from
the build's recorded CMake flags, never from the directory's name.

Nothing is packed from a staging that does not verify: a missing manifest, a file whose size or
sha256 differs from it, an Android library whose ``PT_LOAD`` segments are not 16 KB aligned or
built for another ABI, missing headers, or an artifact over ``third-party/release-size-budget.json``.
Zips are deterministic (sorted entries, fixed timestamps), so a rebuild gives the same sha256.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from rne_tools.backend_catalog import load_catalog
from rne_tools.binaries.elf import ElfError, misaligned_segments
from rne_tools.binaries.errors import BuildError, ManifestError
from rne_tools.binaries.manifest import load_manifest, verify_manifest
from rne_tools.binaries.platforms import ANDROID_ABIS
from rne_tools.binaries.sizes import loaded_bytes
from rne_tools.files import write_atomically
from rne_tools.hashing import sha256_file
from rne_tools.paths import REPO_ROOT

PACKAGE_DIR = REPO_ROOT / "packages" / "react-native-executorch"
LOCK_PATH = PACKAGE_DIR / "binaries.lock.json"
BUDGET_PATH = REPO_ROOT / "third-party" / "release-size-budget.json"
LOCK_SCHEMA = 1
RELEASE_MANIFEST = "rne-binaries.json"
RELEASE_PLATFORMS = ("ios", "android")
# "all": a build with a GPU delegate of its platform (the catalog's processor); "cpu": without.
BACKEND_SETS = ("all", "cpu")
# e_machine of the ELF header for each Android ABI we ship.
_ABI_MACHINE = {"arm64-v8a": 183, "x86_64": 62}
_MODULE_HEADER = "include/executorch/extension/module/module.h"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class ReleaseError(BuildError):
    """A staging cannot be released as it is; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class StagedBuild:
    """One verified build of a staging: the iOS xcframework, or one Android ABI."""

    platform: str
    abi: str | None
    backend_set: str
    backends: tuple[str, ...]
    root: Path
    files: tuple[str, ...]  # paths relative to ``root``, sorted
    source: dict
    sizes: dict

    @property
    def name(self) -> str:
        return f"{self.platform}-{self.abi}-{self.backend_set}" if self.abi else \
            f"{self.platform}-{self.backend_set}"


@dataclass(frozen=True)
class Artifact:
    """A packed zip of one ``StagedBuild`` and its release manifest."""

    build: StagedBuild
    path: Path  # in the repository: "<version>/<name>.zip"
    zip_file: Path
    manifest: dict
    sha256: str
    size: int

    def lock_entry(self) -> dict:
        return {
            "file": self.path.as_posix(),
            "sha256": self.sha256,
            "size": self.size,
            "unpacked_size": self.manifest["unpacked_size"],
            "backends": list(self.build.backends),
            "components": self.manifest["components"],
            "executorch": {k: self.build.source.get(k) for k in ("tag", "commit")},
        }


def _backends(entry: dict) -> tuple[str, ...]:
    """The delegates a build holds: the catalog backends whose build flag its CMake flags set ON."""
    flags = {f for group in entry.get("cmake_flags", {}).values() for f in group}
    catalog = load_catalog()
    return tuple(sorted(b for b in catalog.names() if f"-D{catalog.backend(b).build_flag}=ON" in flags))


def _backend_set(platform: str, backends: tuple[str, ...], where: Path) -> str:
    if "xnnpack" not in backends:
        raise ReleaseError(f"{where}: the build has no XNNPACK delegate (its recorded CMake flags "
                           "do not turn EXECUTORCH_BUILD_XNNPACK on); every release needs it")
    gpu = {b.name for b in load_catalog().backends
           if b.processor == "GPU" and platform in b.platforms}
    return "all" if gpu & set(backends) else "cpu"


def _files(root: Path, entry: str) -> list[str]:
    path = root / entry
    if path.is_symlink():
        raise ReleaseError(f"{path} is a symlink: release artifacts hold regular files only")
    if path.is_file():
        return [entry]
    found = []
    for p in sorted(path.rglob("*")):
        if p.is_symlink():
            raise ReleaseError(f"{p} is a symlink: release artifacts hold regular files only; "
                               "copy its target in its place before releasing")
        if p.is_file():
            found.append(p.relative_to(root).as_posix())
    return found


def _check_android_library(so: Path, abi: str) -> None:
    if not so.is_file():
        raise ReleaseError(f"{so} is missing: run `python tools/build_binaries.py --platform "
                           f"android --abi {abi}` on a machine with the NDK")
    try:
        bad = misaligned_segments(so)
    except ElfError as e:
        raise ReleaseError(f"{e}: not a library an Android app can load") from None
    if bad:
        raise ReleaseError(
            f"{so}: PT_LOAD segments aligned to {', '.join(map(str, sorted(set(bad))))} bytes, "
            "below the 16 KB Google Play requires: link it with -Wl,-z,max-page-size=16384 "
            "(cpp/shared_library does) and rebuild")
    with open(so, "rb") as f:
        header = f.read(20)
    machine = int.from_bytes(header[18:20], "little")
    if machine != _ABI_MACHINE[abi]:
        raise ReleaseError(f"{so}: built for ELF machine {machine}, not {abi} "
                           f"({_ABI_MACHINE[abi]}); stage the {abi} build there")


def inspect_staging(root: Path) -> list[StagedBuild]:
    """The verified builds of a staged directory, or a ReleaseError naming the first problem."""
    root = Path(root)
    path = root / "manifest.json"
    try:
        data = load_manifest(path)
        result = verify_manifest(path)
    except ManifestError as e:
        raise ReleaseError(str(e)) from None
    if not result.ok:
        raise ReleaseError(f"{root} does not match its manifest ({'; '.join(result.problems)}); "
                           "rebuild the platform or restore the staged files")
    platform = data.get("platform")
    if platform not in RELEASE_PLATFORMS:
        raise ReleaseError(f"{path} is a {platform!r} build; releases hold "
                           f"{' and '.join(RELEASE_PLATFORMS)} builds only")
    builds = []
    for name, entry in sorted(data["builds"].items()):
        backends = _backends(entry)
        backend_set = _backend_set(platform, backends, path)
        if platform == "android":
            if name not in ANDROID_ABIS:
                raise ReleaseError(f"{path}: build {name!r} is not an Android ABI "
                                   f"({', '.join(ANDROID_ABIS)})")
            _check_android_library(root / name / "libexecutorch.so", name)
            if not (root / _MODULE_HEADER).is_file():
                raise ReleaseError(f"{root / _MODULE_HEADER} is missing: the Android staging "
                                   "installs ExecuTorch's headers in include/; rebuild it")
            files = [*_files(root, name), *_files(root, "include")]
        else:
            if not (root / "ExecuTorch.xcframework" / "Info.plist").is_file():
                raise ReleaseError(f"{root}/ExecuTorch.xcframework/Info.plist is missing: not an "
                                   "xcframework; run `python tools/build_binaries.py --platform ios`")
            if "mlx" in backends and not (root / "mlx.metallib").is_file():
                raise ReleaseError(f"{root}/mlx.metallib is missing, but the build holds MLX, "
                                   "which loads its Metal kernels from it")
            files = [f for staged in entry.get("staged", []) for f in _files(root, staged)]
        builds.append(StagedBuild(platform, name if platform == "android" else None, backend_set,
                                  backends, root, tuple(sorted(files)), entry.get("source", {}),
                                  entry.get("sizes", {})))
    if not builds:
        raise ReleaseError(f"{path} records no build")
    return builds


def _components(build: StagedBuild) -> dict:
    """The build's size table: the manifest's where it has one, else per staged part."""
    table: dict[str, dict] = {}
    for rel in build.files:
        f = build.root / rel
        part = rel.split("/", 1)[0]
        if build.platform == "android" and part == build.abi:
            part = "libexecutorch.so"
        row = table.setdefault(part, {"bytes": 0})
        row["bytes"] += f.stat().st_size
        if rel.endswith(".so"):
            row["loaded_bytes"] = row.get("loaded_bytes", 0) + loaded_bytes(f)
    if build.sizes:
        table["linked"] = build.sizes
    return table


def load_budget(path: Path = BUDGET_PATH) -> dict:
    try:
        return json.loads(path.read_text())["zip_bytes"]
    except (OSError, KeyError, json.JSONDecodeError) as e:
        raise ReleaseError(f"the release size budget {path} cannot be read ({e}); restore it "
                           "from git") from None


def pack(build: StagedBuild, version: str, out_dir: Path, budget: dict) -> Artifact:
    """Zip ``build`` into ``out_dir`` (atomically) and check it against ``budget``."""
    hashes = {rel: sha256_file(build.root / rel) for rel in build.files}
    manifest = {
        "schema": LOCK_SCHEMA,
        "package": "react-native-executorch",
        "version": version,
        "platform": build.platform,
        "abi": build.abi,
        "backend_set": build.backend_set,
        "backends": list(build.backends),
        "executorch": build.source,
        "components": _components(build),
        "unpacked_size": sum((build.root / rel).stat().st_size for rel in build.files),
        "files": [{"path": rel, "size": (build.root / rel).stat().st_size, "sha256": hashes[rel]}
                  for rel in build.files],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{build.name}.zip"
    fd, tmp = tempfile.mkstemp(prefix=f".{build.name}-", suffix=".zip", dir=out_dir)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as z:
            entries = [(RELEASE_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode())]
            entries += [(rel, None) for rel in build.files]
            for name, data in entries:
                info = zipfile.ZipInfo(name, _ZIP_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                if data is None:
                    with open(build.root / name, "rb") as src, z.open(info, "w") as dst:
                        while block := src.read(1 << 20):
                            dst.write(block)
                else:
                    z.writestr(info, data)
        size = Path(tmp).stat().st_size
        limit = budget.get(build.platform, {}).get(build.backend_set)
        if limit is None:
            raise ReleaseError(f"the size budget has no entry for {build.platform} "
                               f"{build.backend_set}: add one in a reviewed change")
        if size > limit:
            raise ReleaseError(
                f"{build.name}.zip is {size} bytes, over its budget of {limit} "
                f"(third-party/{BUDGET_PATH.name}): find what grew in its size table "
                f"{json.dumps(manifest['components'])} or raise the budget in a reviewed change")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Artifact(build, Path(version) / target.name, target, manifest, sha256_file(target), size)


def plan_release(staged: list[Path], version: str, out_dir: Path,
                 budget: dict | None = None) -> list[Artifact]:
    """Verify every staging, then pack one artifact per build; refuses duplicates."""
    builds = [b for root in staged for b in inspect_staging(root)]
    seen: dict[str, Path] = {}
    for b in builds:
        if b.name in seen:
            raise ReleaseError(f"{b.name} is staged twice ({seen[b.name]} and {b.root}): pass one "
                               "staging per platform and backend set")
        seen[b.name] = b.root
    budget = load_budget() if budget is None else budget
    return [pack(b, version, out_dir, budget) for b in builds]


def lock_document(version: str, base_url: str, artifacts: list[Artifact]) -> dict:
    """The package's lock: per platform, backend set (and ABI), where each artifact is and its
    checksum; the fetch script (scripts/fetch-binaries.js) reads exactly this."""
    platforms: dict[str, dict] = {}
    for a in sorted(artifacts, key=lambda a: a.build.name):
        sets = platforms.setdefault(a.build.platform, {})
        if a.build.abi is None:
            sets[a.build.backend_set] = a.lock_entry()
        else:
            sets.setdefault(a.build.backend_set, {})[a.build.abi] = a.lock_entry()
    return {"schema": LOCK_SCHEMA, "package": "react-native-executorch", "version": version,
            "base_url": base_url.rstrip("/"), "artifacts": platforms}


def write_lock(document: dict, path: Path = LOCK_PATH) -> None:
    """Write the lock atomically (a reader never sees half of it)."""
    write_atomically(path, json.dumps(document, indent=2, sort_keys=True) + "\n")


def package_version(package_dir: Path = PACKAGE_DIR) -> str:
    return json.loads((package_dir / "package.json").read_text())["version"]

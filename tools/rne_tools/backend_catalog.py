"""The backend catalog: ``model-registry/backends.yaml``, every compute backend declared once.

A backend's identity (its SDK name, the ExecuTorch delegate's runtime name, its ``.pte`` code,
UI label, CMake build flag, static libraries, platforms with their preference order,
simulator rules) is read
from here by every Python table that needs it, and ``tools/gen_registry.py`` writes it out for
TypeScript and C++ (``registry.codegen.generated_files``). The loader is strict: every problem is
reported at once as ``backends.yaml: <field path>: <what is wrong>``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast

import yaml

from rne_tools import strict_yaml
from rne_tools.errors import RegistryError
from rne_tools.models import ARCHITECTURES
from rne_tools.paths import REGISTRY_DIR

CATALOG_FILE = REGISTRY_DIR / "backends.yaml"

SimulatorRule = Literal["allowed", "never", "explicit_only"]
SIMULATOR_RULES: tuple[SimulatorRule, ...] = ("allowed", "never", "explicit_only")
PROCESSORS = ("CPU", "GPU")

# A name becomes a TypeScript string-union member, a C++ string and a Python module name
# (export/backends/<name>.py), so it is kept to what all three take unquoted.
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_RUNTIME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_BUILD_FLAG = re.compile(r"^EXECUTORCH_BUILD_[A-Z0-9_]+$")
_TITLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 .+_-]*$")
# An archive path inside an ExecuTorch build directory; a shared library of the wheel's SDK.
_ARCHIVE = re.compile(r"^(?:[A-Za-z0-9_+-][A-Za-z0-9_.+-]*/)*lib[A-Za-z0-9_.+-]+\.a$")
_SDK_LIBRARY = re.compile(r"^lib[A-Za-z0-9_.+-]+\.so$")
_FIELDS = (
    "name", "title", "processor", "runtime", "pte_code", "build_flag", "platforms", "archives"
)
_OPTIONAL_FIELDS = ("simulator", "sdk_libraries", "architectures")
_ARCHIVE_LISTS = ("whole", "linked")
_OPTIONAL_ARCHIVE_LISTS = ("external", "arm64")


@dataclass(frozen=True)
class Archives:
    """A backend's static libraries, as paths in an ExecuTorch build directory (Ninja layout)."""

    whole: tuple[str, ...]  # register the delegate from a static initializer: linked whole
    linked: tuple[str, ...]  # taken as needed
    external: tuple[str, ...]  # from the delegate's own ExternalProject (at this path on iOS too)
    arm64: tuple[str, ...]  # in arm64 builds only


@dataclass(frozen=True)
class BackendInfo:
    """One backend of the catalog."""

    name: str
    title: str
    processor: str
    runtime: str
    pte_code: int
    build_flag: str
    # Platform -> rank in its preference order (1 first); the backend runs on these only.
    ranks: Mapping[str, int]
    # Platform -> rule on its simulator/emulator; platforms not listed: "allowed".
    simulator: Mapping[str, SimulatorRule]
    archives: Archives
    # The shared libraries the executorch wheel's C++ SDK ships it as (none: it does not).
    sdk_libraries: tuple[str, ...] = ()
    # The architectures its source transforms are written for (none listed: every one).
    architectures: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The name UIs show: ``MLX (GPU)``."""
        return f"{self.title} ({self.processor})"

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(self.ranks)

    def simulator_rule(self, platform: str) -> SimulatorRule:
        return self.simulator.get(platform, "allowed")

    @property
    def cmake_target(self) -> str:
        """Its delegate's target in ExecuTorch's CMake package, named like its whole archive
        (``libxnnpack_backend.a``: ``xnnpack_backend``)."""
        return Path(self.archives.whole[0]).name.removeprefix("lib").removesuffix(".a")

    def takes(self, architecture: str) -> bool:
        """Whether models of ``architecture`` export to this backend."""
        return not self.architectures or architecture in self.architectures


@dataclass(frozen=True)
class BackendCatalog:
    platforms: tuple[str, ...]
    backends: tuple[BackendInfo, ...]  # in the file's order (by .pte code there)
    source: Path

    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.backends)

    def backend(self, name: str) -> BackendInfo:
        """The backend called ``name``; a clear error names the known ones."""
        for b in self.backends:
            if b.name == name:
                return b
        raise RegistryError(
            f"unknown backend {name!r}; {self.source.name} declares: {', '.join(self.names())}"
        )

    def preference(self, platform: str) -> tuple[str, ...]:
        """The backends of ``platform``, best first (after a model's own platform default)."""
        on = [b for b in self.backends if platform in b.ranks]
        return tuple(b.name for b in sorted(on, key=lambda b: b.ranks[platform]))

    def pte_codes(self) -> dict[str, int]:
        return {b.name: b.pte_code for b in self.backends}


def _problems(doc: Any, name: str) -> Iterator[str]:
    """Everything wrong with the parsed file ``doc``, one ``<file>: <field>: <problem>`` each."""
    if not isinstance(doc, dict):
        yield f"{name}: <root>: must be a mapping with 'platforms' and 'backends'"
        return
    for key in sorted(set(doc) - {"platforms", "backends"}, key=str):
        yield f"{name}: {key}: unknown field (allowed: platforms, backends)"
    platforms = doc.get("platforms")
    if (
        not isinstance(platforms, list)
        or not platforms
        or not all(isinstance(p, str) and _NAME.match(p) for p in platforms)
        or len(set(platforms)) != len(platforms)
    ):
        yield f"{name}: platforms: must be a non-empty list of distinct lowercase names"
        platforms = []
    backends = doc.get("backends")
    if not isinstance(backends, list) or not backends:
        yield f"{name}: backends: must be a non-empty list"
        return
    for i, entry in enumerate(backends):
        yield from _entry_problems(entry, f"{name}: backends[{i}]", platforms)
    if not all(isinstance(b, dict) for b in backends):
        return
    for key in ("name", "runtime", "pte_code", "build_flag"):
        seen: dict[Any, int] = {}
        for i, b in enumerate(backends):
            value = b.get(key)
            if value is None or isinstance(value, (dict, list)):
                continue
            if value in seen:
                yield (
                    f"{name}: backends[{i}].{key}: {value!r} is already used by "
                    f"backends[{seen[value]}]"
                )
            seen.setdefault(value, i)
    for platform in platforms:
        ranks: dict[int, int] = {}
        for i, b in enumerate(backends):
            rank = b["platforms"].get(platform) if isinstance(b.get("platforms"), dict) else None
            if not _positive_int(rank):
                continue
            if rank in ranks:
                yield (
                    f"{name}: backends[{i}].platforms.{platform}: rank {rank} is already "
                    f"backends[{ranks[rank]}]'s (each rank once per platform)"
                )
            ranks.setdefault(rank, i)
        if not ranks:
            yield f"{name}: platforms: no backend runs on {platform!r}"


def _entry_problems(entry: Any, where: str, platforms: list[str]) -> Iterator[str]:
    if not isinstance(entry, dict):
        yield f"{where}: must be a mapping"
        return
    yield from _field_problems(entry, where, _FIELDS, _OPTIONAL_FIELDS)
    checks: list[tuple[str, bool, str]] = [
        ("name", _matches(_NAME, entry.get("name")), "a lowercase name ([a-z][a-z0-9_]*)"),
        ("title", _matches(_TITLE, entry.get("title")), "a short human name such as MLX"),
        ("processor", entry.get("processor") in PROCESSORS, f"one of {', '.join(PROCESSORS)}"),
        ("runtime", _matches(_RUNTIME, entry.get("runtime")), "a delegate name such as XnnpackBackend"),
        ("pte_code", _positive_int(entry.get("pte_code")), "a positive integer"),
        ("build_flag", _matches(_BUILD_FLAG, entry.get("build_flag")), "EXECUTORCH_BUILD_<NAME>"),
    ]
    for key, ok, expected in checks:
        if key in entry and not ok:
            yield f"{where}.{key}: {entry[key]!r} is not {expected}"
    ranks = entry.get("platforms")
    if "platforms" in entry:
        if not isinstance(ranks, dict) or not ranks:
            yield f"{where}.platforms: must map each platform it runs on to its rank (1 first)"
            ranks = {}
        for platform, rank in ranks.items():
            if platform not in platforms:
                yield f"{where}.platforms.{platform}: not a platform (platforms: {', '.join(platforms)})"
            if not _positive_int(rank):
                yield f"{where}.platforms.{platform}: {rank!r} is not a rank (a positive integer)"
    if "archives" in entry:
        yield from _archives_problems(entry["archives"], f"{where}.archives")
    libraries = entry.get("sdk_libraries", [])
    if not isinstance(libraries, list) or not all(_matches(_SDK_LIBRARY, n) for n in libraries):
        yield f"{where}.sdk_libraries: must be a list of shared library names (lib<name>.so)"
    architectures = entry.get("architectures")
    known = set(ARCHITECTURES)
    if "architectures" in entry and (
        not isinstance(architectures, list) or not architectures
        or not all(isinstance(a, str) and a in known for a in architectures)
    ):
        yield (
            f"{where}.architectures: must be a non-empty list of architectures (the modules of "
            f"tools/rne_tools/models: {', '.join(sorted(known))}); leave it out if every one exports"
        )
    rules = entry.get("simulator", {})
    if not isinstance(rules, dict):
        yield f"{where}.simulator: must map a platform to a rule ({', '.join(SIMULATOR_RULES)})"
        return
    for platform, rule in rules.items():
        if isinstance(ranks, dict) and platform not in ranks:
            yield f"{where}.simulator.{platform}: the backend does not run on {platform!r}"
        if rule not in SIMULATOR_RULES:
            yield f"{where}.simulator.{platform}: {rule!r} is not one of {', '.join(SIMULATOR_RULES)}"


def _field_problems(mapping: dict[str, Any], where: str, required: tuple[str, ...],
                    optional: tuple[str, ...], missing: str = "") -> Iterator[str]:
    """A required key that is absent, and every key that is neither required nor optional."""
    for key in required:
        if key not in mapping:
            yield f"{where}: {key!r} is a required field{missing}"
    for key in sorted(set(mapping) - set(required) - set(optional), key=str):
        yield f"{where}.{key}: unknown field (allowed: {', '.join(required + optional)})"


def _archives_problems(archives: Any, where: str) -> Iterator[str]:
    allowed = _ARCHIVE_LISTS + _OPTIONAL_ARCHIVE_LISTS
    if not isinstance(archives, dict):
        yield f"{where}: must map {', '.join(allowed)} to lists of archive paths"
        return
    yield from _field_problems(archives, where, _ARCHIVE_LISTS, _OPTIONAL_ARCHIVE_LISTS,
                               missing=" (an empty list if it has none)")
    for key in allowed:
        paths = archives.get(key, [])
        if not isinstance(paths, list):
            yield f"{where}.{key}: must be a list of archive paths"
            continue
        for i, path in enumerate(paths):
            if not _matches(_ARCHIVE, path) or ".." in path.split("/"):
                yield (
                    f"{where}.{key}[{i}]: {path!r} is not a relative path to a static library "
                    "in the build directory (such as backends/xnnpack/libxnnpack_backend.a)"
                )
    if isinstance(archives.get("whole"), list) and not archives["whole"]:
        yield f"{where}.whole: empty: the delegate registers itself from one of its archives"


def _matches(pattern: re.Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and pattern.match(value) is not None


def _positive_int(value: Any) -> bool:
    # bool is an int subclass; `true` is not a code.
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31


def parse_catalog(text: str, source: Path) -> BackendCatalog:
    """The catalog in ``text`` (the content of ``source``); ``RegistryError`` lists every problem."""
    name = source.name
    try:
        doc = strict_yaml.load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"invalid backend catalog:\n  - {name}: not valid YAML: {exc}") from None
    problems = list(_problems(doc, name))
    if problems:
        raise RegistryError("invalid backend catalog:\n" + "\n".join(f"  - {p}" for p in problems))
    backends = tuple(
        BackendInfo(
            name=b["name"],
            title=b["title"],
            processor=b["processor"],
            runtime=b["runtime"],
            pte_code=b["pte_code"],
            build_flag=b["build_flag"],
            ranks=MappingProxyType(dict(b["platforms"])),
            simulator=MappingProxyType(cast(dict[str, SimulatorRule], dict(b.get("simulator", {})))),
            archives=Archives(
                **{key: tuple(b["archives"].get(key, ())) for key in Archives.__dataclass_fields__}
            ),
            sdk_libraries=tuple(b.get("sdk_libraries", ())),
            architectures=tuple(b.get("architectures", ())),
        )
        for b in doc["backends"]
    )
    return BackendCatalog(platforms=tuple(doc["platforms"]), backends=backends, source=source)


@functools.cache
def load_catalog(path: Path = CATALOG_FILE) -> BackendCatalog:
    """The catalog at ``path`` (read once per process)."""
    return parse_catalog(path.read_text(), path)

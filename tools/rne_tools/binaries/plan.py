"""The build plan: an ordered list of typed steps with exact argument lists.

A plan is pure data. It names paths through placeholders (``$REPO``, ``$SOURCE``, ``$BUILD``,
``$NDK``, ``$VULKAN_SDK``: the LunarG Vulkan SDK whose glslc compiles Android's shaders,
``$PYTHON``, ``$CACHE``: the source/build cache outside the work tree) so the same inputs give byte-identical plans on every machine; the
executor expands them just before running a step. ``--dry-run`` prints a plan, the tests
compare plans with reviewed files under ``tests/fixtures/build_plans/``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rne_tools.binaries.errors import BuildError

_PLACEHOLDER_RE = re.compile(r"\$(REPO|SOURCE|BUILD|NDK|VULKAN_SDK|PYTHON|CACHE)(?![A-Za-z0-9_])")
_SAFE_RE = re.compile(r"[\w@%+=:,./$-]+")


def _q(arg: str) -> str:
    """Shell-quote for display, leaving placeholders readable."""
    return arg if _SAFE_RE.fullmatch(arg) else shlex.quote(arg)


@dataclass(frozen=True)
class Run:
    """Run one program. ``inputs`` must exist before it starts (checked, with a clear error)."""

    description: str
    argv: tuple[str, ...]
    cwd: str = "$REPO"
    env: tuple[tuple[str, str], ...] = ()
    inputs: tuple[str, ...] = ()

    kind = "run"

    def to_json(self) -> dict:
        out: dict = {"kind": self.kind, "description": self.description, "argv": list(self.argv)}
        out["cwd"] = self.cwd
        if self.env:
            out["env"] = dict(self.env)
        if self.inputs:
            out["inputs"] = list(self.inputs)
        return out

    def render(self) -> str:
        env = " ".join(f"{k}={_q(v)}" for k, v in self.env)
        cmd = " ".join(_q(a) for a in self.argv)
        return f"(cd {self.cwd} && {env + ' ' if env else ''}{cmd})"


@dataclass(frozen=True)
class ApplyPatches:
    """Apply the project's patch series to the source tree, all or nothing.

    Every patch is checked before any is applied; a patch that is already applied (its reverse
    applies cleanly) is skipped, so re-running on a patched tree is harmless.
    """

    description: str
    source: str
    patches: tuple[str, ...]

    kind = "patches"

    def argv_for(self, patch: str) -> tuple[str, ...]:
        return ("git", "-C", self.source, "apply", "--whitespace=nowarn", patch)

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "description": self.description,
            "commands": [list(self.argv_for(p)) for p in self.patches],
        }

    def render(self) -> str:
        if not self.patches:
            return "# patch series is empty: nothing to apply"
        return "\n".join(" ".join(_q(a) for a in self.argv_for(p)) for p in self.patches)


@dataclass(frozen=True)
class Stage:
    """Copy a built file or directory into the repository, atomically (temp name, then rename)."""

    description: str
    src: str
    dest: str

    kind = "stage"

    def to_json(self) -> dict:
        return {"kind": self.kind, "description": self.description, "src": self.src, "dest": self.dest}

    def render(self) -> str:
        return f"stage {_q(self.src)} -> {_q(self.dest)}"


@dataclass(frozen=True)
class WriteManifest:
    """Write the platform manifest for the artifacts under ``root`` (see ``manifest.py``).

    ``artifacts`` lists staged files/directories relative to ``root``; an empty tuple means
    "every executable and library of the CMake build in ``root``" (the host build). ``sizes``
    adds the per-component size table (``sizes.py``): ``"wheel"`` for a build against a wheel's
    SDK, or the path of a ``libexecutorch.so`` linked from archives (its link map beside it).
    """

    description: str
    path: str
    root: str
    build: str
    artifacts: tuple[str, ...]
    cmake_flags: tuple[tuple[str, tuple[str, ...]], ...]
    sizes: str = ""

    kind = "manifest"

    def to_json(self) -> dict:
        out = {
            "kind": self.kind,
            "description": self.description,
            "path": self.path,
            "root": self.root,
            "build": self.build,
            "artifacts": list(self.artifacts),
            "cmake_flags": {name: list(flags) for name, flags in self.cmake_flags},
        }
        if self.sizes:
            out["sizes"] = self.sizes
        return out

    def render(self) -> str:
        what = ", ".join(self.artifacts) if self.artifacts else "all CMake target artifacts"
        return f"write manifest {self.path} (build {self.build!r}: {what})"


Step = Run | ApplyPatches | Stage | WriteManifest


@dataclass(frozen=True)
class Plan:
    """Everything one ``build_binaries.py`` invocation will do, in order."""

    platform: str
    steps: tuple[Step, ...]

    def to_json(self) -> dict:
        return {"platform": self.platform, "steps": [s.to_json() for s in self.steps]}

    def dumps(self) -> str:
        """The plan as stable JSON text (the format of the reviewed expected plans)."""
        return json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"

    def render(self) -> str:
        """Human-readable: one numbered block per step, in execution order."""
        lines = []
        for i, step in enumerate(self.steps, 1):
            lines.append(f"# [{i}/{len(self.steps)}] {step.description}")
            lines.append(step.render())
        return "\n".join(lines) + "\n"


def expand(text: str, values: Mapping[str, Path | str]) -> str:
    """Replace the placeholders in ``text`` with real paths; an unknown one is an error."""

    def sub(match: re.Match) -> str:
        name = "$" + match.group(1)
        if name not in values:
            raise BuildError(
                f"the plan uses {name} but no value was given for it "
                f"(for $NDK set ANDROID_NDK to your Android NDK directory, for $VULKAN_SDK "
                f"VULKAN_SDK to your LunarG Vulkan SDK)"
            )
        return str(values[name])

    return _PLACEHOLDER_RE.sub(sub, text)

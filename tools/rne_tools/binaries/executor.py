"""Run a plan: expand placeholders, run each step with a progress bar, log every command.

Each ``Run`` step's output goes to ``<build>/logs/NN-<slug>.log`` (and to the terminal with
``verbose``); a failing step raises :class:`BuildError` with the command, its log path and the
log's tail. Programs are looked up on a ``PATH`` that starts with the running interpreter's
``bin`` directory, so the virtual environment's ``cmake`` and ``ninja`` win over older system ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from rne_tools.binaries import manifest as manifest_mod
from rne_tools.binaries import shared_library
from rne_tools.binaries import sizes as sizes_mod
from rne_tools.binaries.errors import BuildError
from rne_tools.binaries.lock import SourceLock
from rne_tools.binaries.patches import Patch, apply_series
from rne_tools.binaries.plan import ApplyPatches, Plan, Run, Stage, WriteManifest, expand

_TAIL_LINES = 40


@dataclass
class BuildContext:
    """The machine-specific values a plan's placeholders stand for, plus provenance."""

    repo: Path
    build: Path
    python: str
    lock: SourceLock
    ref: str
    source: Path | None = None
    ndk: Path | None = None
    vulkan_sdk: Path | None = None
    cache: Path | None = None
    patches: list[Patch] = field(default_factory=list)
    tool_versions: dict[str, str] = field(default_factory=dict)
    base_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def placeholders(self) -> dict[str, Path | str]:
        values: dict[str, Path | str] = {"$REPO": self.repo, "$BUILD": self.build, "$PYTHON": self.python}
        if self.source is not None:
            values["$SOURCE"] = self.source
        if self.ndk is not None:
            values["$NDK"] = self.ndk
        if self.vulkan_sdk is not None:
            values["$VULKAN_SDK"] = self.vulkan_sdk
        if self.cache is not None:
            values["$CACHE"] = self.cache
        return values

    def env(self) -> dict[str, str]:
        return build_env(self.python, self.base_env)


def stable_interpreter() -> str:
    """The running interpreter, named through its virtual environment's real location.

    A checkout's ``.venv`` links to the machine-wide environment (scripts/setup.sh). Naming the
    interpreter through the link's target gives every clone the same ``PYTHON_EXECUTABLE``,
    cmake and torch include paths, so the ExecuTorch build they share is not reconfigured (and
    partly rebuilt) for each clone.
    """
    if sys.prefix == sys.base_prefix:
        return sys.executable
    return str(Path(sys.prefix).resolve() / "bin" / Path(sys.executable).name)


def build_env(python: str, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with the interpreter's ``bin`` directory first on ``PATH``.

    Not resolved: a venv's python is a symlink, and the venv's bin/ (its cmake, ninja) is what
    must win over older system tools.
    """
    env = dict(base)
    env["PATH"] = str(Path(python).parent) + os.pathsep + env.get("PATH", "")
    return env


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def _missing_inputs(paths: list[Path]) -> str | None:
    missing = [p for p in paths if not p.exists()]
    if not missing:
        return None
    lines = []
    for p in missing:
        lines.append(f"  {p} is missing")
        if p.parent.is_dir():
            near = sorted(x.name for x in p.parent.iterdir())[:30]
            lines.append(f"    {p.parent} holds: {', '.join(near) or '(nothing)'}")
    return "\n".join(lines)


def _run(step: Run, ctx: BuildContext, log: Path, verbose: bool) -> None:
    values = ctx.placeholders()
    argv = [expand(a, values) for a in step.argv]
    cwd = Path(expand(step.cwd, values))
    env = ctx.env()
    env.update({k: expand(v, values) for k, v in step.env})
    missing = _missing_inputs([Path(expand(i, values)) for i in step.inputs])
    if missing:
        raise BuildError(
            f"step '{step.description}' cannot start, its inputs are missing:\n{missing}\n"
            "The previous step did not produce what the plan expects; if the pinned ExecuTorch "
            "names its libraries differently, update the lists in "
            "tools/rne_tools/binaries/platforms.py."
        )
    if not cwd.is_dir():
        raise BuildError(f"step '{step.description}': working directory {cwd} does not exist")
    if shutil.which(argv[0], path=env.get("PATH")) is None:
        raise BuildError(f"step '{step.description}': program {argv[0]!r} not found on PATH")
    log.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    with log.open("w") as out:
        out.write("$ " + " ".join(argv) + "\n")
        out.flush()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace",
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            tail.append(line)
            if verbose:
                tqdm.write(line.rstrip("\n"), file=sys.stderr)
        code = proc.wait()
    if code != 0:
        raise BuildError(
            f"step '{step.description}' failed (exit {code}):\n  $ {' '.join(argv)}\n"
            f"full log: {log}\n--- last {len(tail)} lines ---\n{''.join(tail)}"
        )


def _stage(step: Stage, ctx: BuildContext) -> None:
    values = ctx.placeholders()
    src, dest = Path(expand(step.src, values)), Path(expand(step.dest, values))
    if not src.exists():
        raise BuildError(f"cannot stage {src}: the build did not produce it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.staging")
    old = dest.with_name(f".{dest.name}.old")
    for p in (tmp, old):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()
    if src.is_dir():
        shutil.copytree(src, tmp, symlinks=True)
    else:
        shutil.copy2(src, tmp)
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    if old.is_dir():
        shutil.rmtree(old)
    elif old.exists():
        old.unlink()


def _source_record(ctx: BuildContext) -> dict:
    if ctx.source is None:  # host: the C++ SDK of the pip wheel
        return {"executorch_wheel": ctx.tool_versions.get("executorch (wheel)", ctx.lock.wheel)}
    stamp = ctx.source.parent / "source.json"
    extra: dict = {}
    if stamp.is_file():  # a tree written from mirrors by source_cache (no .git)
        record = json.loads(stamp.read_text())
        commit = next(s["commit"] for s in record["sources"] if s["path"] == ".")
        extra = {
            "submodules": {s["path"]: s["commit"] for s in record["sources"] if s["path"] != "."},
            "missing_blobs": record["missing_blobs"],
        }
    else:
        head = subprocess.run(
            ["git", "-C", str(ctx.source), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        if head.returncode != 0:
            raise BuildError(f"cannot read the commit of {ctx.source}: {head.stderr.strip()}")
        commit = head.stdout.strip()
    return {
        "repository": ctx.lock.repository,
        "tag": ctx.lock.tag,
        "requested": ctx.ref,
        "commit": commit,
        "matches_lock": commit == ctx.lock.commit,
        **extra,
    }


def _write_manifest(step: WriteManifest, ctx: BuildContext, platform: str) -> None:
    values = ctx.placeholders()
    root = Path(expand(step.root, values))
    staged = list(step.artifacts) or manifest_mod.cmake_build_artifacts(root)
    entry = {
        "source": _source_record(ctx),
        "patches": [{"name": p.name, "sha256": p.sha256} for p in ctx.patches]
        if ctx.source is not None
        else [],
        "cmake_flags": {name: list(flags) for name, flags in step.cmake_flags},
        "tools": dict(sorted(ctx.tool_versions.items())),
        "staged": staged,
        "artifacts": manifest_mod.artifact_records(root, staged),
    }
    if step.sizes == "wheel":
        entry["sizes"] = sizes_mod.wheel_build_sizes(root)
    elif step.sizes:
        so = expand(step.sizes, values)
        core = root / sizes_mod.CORE_MODULE
        # The core is only our own code where it links this library (not its archives).
        linked = f"RNE_EXECUTORCH_SHARED_LIBRARY:FILEPATH={so}\n"
        cache = root / "CMakeCache.txt"
        ours = core.is_file() and cache.is_file() and linked in cache.read_text()
        entry["sizes"] = sizes_mod.shared_library_sizes(
            Path(so), Path(shared_library.link_map(so)), shared_library.component_of_archive(),
            core if ours else None)
    manifest_mod.write_manifest(Path(expand(step.path, values)), platform, step.build, entry)


def execute(plan: Plan, ctx: BuildContext, *, verbose: bool = False) -> None:
    """Run every step of ``plan`` in order; stop at the first failure with a clear error."""
    logs = ctx.build / "logs"
    bar = tqdm(plan.steps, unit="step", desc=f"build {plan.platform}", file=sys.stderr)
    for i, step in enumerate(bar, 1):
        bar.set_postfix_str(step.description[:50])
        if isinstance(step, Run):
            _run(step, ctx, logs / f"{i:02d}-{_slug(step.description)}.log", verbose)
        elif isinstance(step, ApplyPatches):
            if ctx.source is None:
                raise BuildError("the plan applies patches but no source tree was given")
            by_path = {str(p.path): p for p in ctx.patches}
            series = []
            for raw in step.patches:
                path = expand(raw, ctx.placeholders())
                if path not in by_path:
                    raise BuildError(f"patch {path} is in the plan but not in the series")
                series.append(by_path[path])
            apply_series(ctx.source, series)
        elif isinstance(step, Stage):
            _stage(step, ctx)
        elif isinstance(step, WriteManifest):
            _write_manifest(step, ctx, plan.platform)
        else:  # pragma: no cover - the Step union is closed
            raise BuildError(f"unknown step type {type(step).__name__}")
    bar.close()

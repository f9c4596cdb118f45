"""The project's patch series over ExecuTorch (``third-party/patches/NNNN-name.patch``).

Patches apply in file-name order. Application is all or nothing: each patch is checked with
``git apply --check`` against the tree as the previous ones left it; on the first conflict the
already-applied ones are reverted and a :class:`PatchError` names the patch and its files.
A patch the tree's record (below) lists as applied, or in a tree without a record one whose
reverse applies cleanly, is already in the tree and is skipped, so running a build twice on the
same checkout is harmless.

The tree records the series it was last given (``.rne-patches/``: a copy of each patch applied,
in order). A later run first reverts, newest first, the recorded patches that the series no
longer has or has changed, so dropping or editing a patch never leaves a stale tree (a cached
source tree is reused across runs). A tree without a record is taken as it is. Reverting a patch
that added an MLX patch (which ExecuTorch's ``apply.sh`` applied to the MLX submodule) also
reverts that MLX patch.

A platform's own patches live in ``third-party/patches/<platform>/`` and apply after the common
series, to that platform's builds only: they change nothing another platform builds, and the
linux source build in the cache (keyed by its source and the series it applies) keeps its tree.

A patch may add a file of this repository to ExecuTorch's tree without holding a copy of it:
an ``Adds-File: <path in ExecuTorch> from <path in this repository>`` line in its message makes
the series append a new-file diff of that file's current contents when it is read. What is
applied, recorded and hashed (``Patch.text``, ``Patch.sha256``) is that whole patch, so editing
the file is editing the patch. The attention kernel the host build compiles
(``cpp/kernels/attention_span.h``) reaches the source build this way.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rne_tools.binaries.errors import BuildError, PatchError
from rne_tools.paths import REPO_ROOT

PATCHES_DIR = REPO_ROOT / "third-party" / "patches"
# Inside a patched tree: copies of the patches applied, and their order (record.json).
RECORD_DIR = ".rne-patches"
_NAME_RE = re.compile(r"^\d{4}-[A-Za-z0-9._-]+\.patch$")
# Lines in `git apply` errors that name the file a hunk failed on.
_FAILED_FILE_RES = (
    re.compile(r"^error: patch failed: (.+):\d+$"),
    re.compile(r"^error: (.+): patch does not apply$"),
    re.compile(r"^error: (.+): No such file or directory$"),
    re.compile(r"^error: (.+): already exists in working directory$"),
    re.compile(r"^error: (.+): does not exist in index$"),
)


_ADDS_FILE_RE = re.compile(r"^Adds-File: (\S+) from (\S+)$", re.M)


@dataclass(frozen=True)
class Patch:
    """One patch: ``path`` is the file in the series (plans name it), ``text`` what is applied
    (the file plus the files its ``Adds-File`` lines add), ``sha256`` the hash of ``text``."""

    name: str
    path: Path
    text: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text).hexdigest()


def _new_file_diff(tree_path: str, contents: bytes, source: Path) -> bytes:
    """A git diff that creates ``tree_path`` holding ``contents`` (text ending in a newline)."""
    if not contents.endswith(b"\n"):
        raise BuildError(f"{source} must end with a newline to be added by a patch")
    lines = contents.splitlines(keepends=True)
    header = (f"diff --git a/{tree_path} b/{tree_path}\nnew file mode 100644\n"
              f"--- /dev/null\n+++ b/{tree_path}\n@@ -0,0 +1,{len(lines)} @@\n")
    return header.encode() + b"".join(b"+" + line for line in lines)


def read_patch(name: str, path: Path, repo: Path = REPO_ROOT) -> Patch:
    """The patch at ``path`` with the files its ``Adds-File`` lines name (under ``repo``)
    appended as new-file diffs."""
    text = path.read_bytes()
    for tree_path, repo_path in _ADDS_FILE_RE.findall(text.decode()):
        source = repo / repo_path
        if not source.is_file():
            raise BuildError(f"{path}: Adds-File names {repo_path}, which is not in {repo}")
        text += _new_file_diff(tree_path, source.read_bytes(), source)
    return Patch(name, path, text)


def patch_series(directory: Path = PATCHES_DIR, repo: Path = REPO_ROOT) -> list[Patch]:
    """The series in application order. Files not named ``NNNN-name.patch`` are an error."""
    if not directory.is_dir():
        return []
    series = []
    for path in sorted(directory.iterdir()):
        if path.suffix != ".patch":
            continue
        if not _NAME_RE.match(path.name):
            raise BuildError(
                f"patch {path} is not named NNNN-short-name.patch; rename it so its "
                "position in the series is explicit"
            )
        series.append(read_patch(path.name, path, repo))
    return series


def platform_series(platform: str, directory: Path = PATCHES_DIR) -> list[Patch]:
    """What ``platform``'s build applies: the common series, then ``<directory>/<platform>/``.

    A platform patch is named by its path under ``directory`` (``ios/0001-x.patch``), which is
    also how plans and manifests refer to it.
    """
    own = [Patch(f"{platform}/{p.name}", p.path, p.text)
           for p in patch_series(directory / platform)]
    return patch_series(directory) + own


def _git_apply(tree: Path, patch: bytes | Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``git apply`` of a patch's text (from stdin) or of a patch file."""
    text = patch.read_bytes() if isinstance(patch, Path) else patch
    result = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", *flags], cwd=tree, input=text, capture_output=True
    )
    return subprocess.CompletedProcess(result.args, result.returncode,
                                       result.stdout.decode(errors="replace"),
                                       result.stderr.decode(errors="replace"))


def conflicting_files(git_stderr: str) -> list[str]:
    """File names that ``git apply`` reported as not applying, in report order."""
    files: list[str] = []
    for line in git_stderr.splitlines():
        for pattern in _FAILED_FILE_RES:
            m = pattern.match(line.strip())
            if m and m.group(1) not in files:
                files.append(m.group(1))
    return files


def apply_series(tree: Path, series: list[Patch]) -> list[str]:
    """Apply ``series`` to ``tree``; return the names of the patches applied now.

    Raises :class:`PatchError` (tree left as it was) if a patch neither applies nor is already
    applied.
    """
    _require_tree_root(tree)
    # The recorded prefix is in the tree as recorded: no per-patch check (a later patch that
    # edits next to an earlier one's lines hides it from `git apply --reverse --check`).
    kept = _undo_dropped(tree, series)
    applied: list[Patch] = []
    for patch in series[kept:]:
        if _git_apply(tree, patch.text, "--check").returncode == 0:
            result = _git_apply(tree, patch.text)
            if result.returncode != 0:  # --check passed, so this is an I/O-level failure
                _revert(tree, applied)
                raise BuildError(f"applying {patch.name} to {tree} failed: {result.stderr.strip()}")
            applied.append(patch)
            continue
        if _git_apply(tree, patch.text, "--check", "--reverse").returncode == 0:
            continue  # already applied
        check = _git_apply(tree, patch.text, "--check")
        _revert(tree, applied)
        files = conflicting_files(check.stderr)
        raise PatchError(
            f"patch {patch.name} does not apply to {tree}: conflicts in "
            f"{', '.join(files) if files else '(git named no file)'}.\n"
            f"{check.stderr.strip()}\n"
            "Nothing was changed. Rebase the patch on the locked ExecuTorch commit "
            "(third-party/executorch.lock.json) or drop it from third-party/patches/.",
            patch=patch.name,
            files=files,
        )
    _write_record(tree, series)
    return [p.name for p in applied]


def _record_file(tree: Path, name: str) -> Path:
    return tree / RECORD_DIR / name.replace("/", "__")


def _undo_dropped(tree: Path, series: list[Patch]) -> int:
    """Revert, newest first, the recorded patches from the first one the series does not
    have at the same place with the same contents; return how many of the series' first
    patches stay applied."""
    record_path = tree / RECORD_DIR / "record.json"
    if not record_path.is_file():
        return 0
    recorded = json.loads(record_path.read_text())
    keep = 0
    for entry, patch in zip(recorded, series, strict=False):
        if (entry["name"], entry["sha256"]) != (patch.name, patch.sha256):
            break
        keep += 1
    # The recorded copies are the texts that were applied (added files included).
    stale = [
        Patch(e["name"], _record_file(tree, e["name"]), _record_file(tree, e["name"]).read_bytes())
        for e in recorded[keep:]
    ]
    if stale:
        _revert(tree, stale)
        _write_record(tree, series[:keep])
    return keep


def _write_record(tree: Path, series: list[Patch]) -> None:
    record_dir = tree / RECORD_DIR
    if record_dir.exists():
        shutil.rmtree(record_dir)
    record_dir.mkdir()
    for patch in series:
        _record_file(tree, patch.name).write_bytes(patch.text)
    entries = [{"name": p.name, "sha256": p.sha256} for p in series]
    (record_dir / "record.json").write_text(json.dumps(entries, indent=1) + "\n")


def _require_tree_root(tree: Path) -> None:
    # Inside a git work tree, `git apply` resolves paths from the work tree's root and silently
    # skips files outside the current directory: only a tree root (or a plain directory) is safe.
    if not tree.is_dir():
        raise BuildError(f"cannot apply patches: {tree} is not a directory")
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=tree, capture_output=True, text=True
    )
    if top.returncode == 0 and Path(top.stdout.strip()).resolve() != tree.resolve():
        raise BuildError(
            f"cannot apply patches to {tree}: it is a subdirectory of the git work tree "
            f"{top.stdout.strip()}; pass the checkout's top-level directory"
        )


# A superproject patch may add an MLX patch that ExecuTorch's own apply.sh applies to the MLX
# submodule at build time (forward only): reverting ours must take that one out of MLX too.
_MLX_PATCHES = "backends/mlx/patches"
_MLX_SOURCE = "backends/mlx/third-party/mlx"
_ADDED_FILE_RE = re.compile(r"^\+\+\+ b/(" + re.escape(_MLX_PATCHES) + r"/[^/\s]+\.patch)$", re.M)


def _revert_inner_patches(tree: Path, patch: Patch) -> None:
    mlx = tree / _MLX_SOURCE
    for added in _ADDED_FILE_RE.findall(patch.text.decode(errors="replace")):
        inner = tree / added
        if inner.is_file() and mlx.is_dir() and _git_apply(mlx, inner, "--check", "--reverse").returncode == 0:
            result = _git_apply(mlx, inner, "--reverse")
            if result.returncode != 0:
                raise BuildError(f"could not revert the MLX patch {added} in {mlx}: "
                                 f"{result.stderr.strip()}")


def _revert(tree: Path, applied: list[Patch]) -> None:
    for patch in reversed(applied):
        _revert_inner_patches(tree, patch)
        result = _git_apply(tree, patch.text, "--reverse")
        if result.returncode != 0:
            raise BuildError(
                f"could not revert {patch.name} in {tree} ({result.stderr.strip()}); reset "
                f"the checkout with `git -C {tree} checkout -- . && git -C {tree} clean -fd` "
                "(a cached source tree: delete it, the next build writes it again)"
            )

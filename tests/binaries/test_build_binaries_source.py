"""The plan's source steps (fetch the locked commit with submodules), run for real with git."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from rne_tools.binaries import BuildContext, build_plan, execute
from rne_tools.binaries.lock import SourceLock
from rne_tools.binaries.plan import Plan

PATCH_FIXTURE = Path(__file__).parents[1] / "fixtures" / "patch_tree"


def _git(*args, cwd=None):
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                   check=True, capture_output=True)


def test_source_steps_fetch_the_locked_commit_with_submodules(tmp_path):
    """The plan's checkout steps, run against local 'upstream' repositories over file://."""
    allow_file = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow",
                  "GIT_CONFIG_VALUE_0": "always"}  # submodules over file:// (git >= 2.38)
    env = {**os.environ, **allow_file}
    dep = tmp_path / "dep"
    dep.mkdir()
    _git("init", "-q", cwd=dep)
    (dep / "dep.h").write_text("int dep();\n")
    _git("add", "-A", cwd=dep)
    _git("commit", "-qm", "dep", cwd=dep)
    upstream = tmp_path / "upstream"
    shutil.copytree(PATCH_FIXTURE / "tree", upstream)
    _git("init", "-q", cwd=upstream)
    subprocess.run(["git", "-c", "protocol.file.allow=always", "submodule", "add", "-q",
                    dep.as_uri(), "third-party/dep"], cwd=upstream, check=True, env=env)
    _git("add", "-A", cwd=upstream)
    _git("commit", "-qm", "v1", cwd=upstream)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=upstream, capture_output=True,
                            text=True, check=True).stdout.strip()

    lock = SourceLock(upstream.as_uri(), "v1", commit, "executorch==1.5.1")
    plan = build_plan("android", lock=lock, patches=[], abis=("x86_64",), jobs=1)
    n = [s.kind for s in plan.steps].index("patches") + 1
    src = tmp_path / "cache" / "executorch-src"
    ctx = BuildContext(repo=tmp_path, build=tmp_path / "build", python=sys.executable, lock=lock,
                       ref=commit, source=src, base_env=env)
    execute(Plan("android", plan.steps[:n]), ctx)

    head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert head == commit
    assert (src / "third-party" / "dep" / "dep.h").read_text() == "int dep();\n"

    # A second run resets local edits and untracked files, in the tree and in submodules.
    (src / "src" / "kernel.cpp").write_text("edited\n")
    (src / "stray.txt").write_text("x")
    (src / "third-party" / "dep" / "stray.o").write_text("x")
    execute(Plan("android", plan.steps[:n]), ctx)
    assert "return x * 2;" in (src / "src" / "kernel.cpp").read_text()
    assert not (src / "stray.txt").exists()
    assert not (src / "third-party" / "dep" / "stray.o").exists()

"""The linux build's source cache: locked trees written out of local git mirrors, once."""

import json
import subprocess

import pytest

from rne_tools.binaries.errors import BuildError
from rne_tools.binaries.lock import PinnedSource, SourceLock
from rne_tools.binaries.source_cache import SourceLayout, populate
from rne_tools.paths import cache_root


def _repo(path, files):
    """A bare mirror at ``path/repo`` holding one commit with ``files``; returns its sha."""
    work = path.with_suffix(".work")
    work.mkdir(parents=True)
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--mirror", str(work), str(path / "repo")], check=True)
    return sha


def test_populate_writes_the_locked_trees_once(tmp_path):
    mirrors = tmp_path / "mirrors"
    et = _repo(mirrors / "pytorch+executorch", {"CMakeLists.txt": "project(et)\n", "run.sh": "x"})
    sub = _repo(mirrors / "acme+dep", {"dep.h": "// dep\n"})
    fmt = _repo(mirrors / "fmtlib+fmt", {"fmt.h": "// fmt\n"})
    lock = SourceLock(
        "https://github.com/pytorch/executorch.git", "t", et, "executorch==1.5.1", "",
        (PinnedSource("third-party/dep", "https://github.com/acme/dep.git", sub),),
        (PinnedSource("fmt", "https://github.com/fmtlib/fmt.git", fmt),),
    )
    layout = SourceLayout(tmp_path / "cache", lock)
    assert not layout.is_complete()
    assert "--source-mirror" in layout.missing_message()

    assert populate(layout, [mirrors]) == []
    assert layout.is_complete()
    assert layout.executorch.name == "executorch"  # CMake insists on the name
    assert (layout.executorch / "CMakeLists.txt").read_text() == "project(et)\n"
    assert (layout.executorch / "third-party/dep/dep.h").is_file()
    assert (layout.extra("fmt") / "fmt.h").is_file()
    stamp = json.loads((layout.executorch.parent / "source.json").read_text())
    assert {s["path"]: s["commit"] for s in stamp["sources"]} == {".": et, "third-party/dep": sub}

    (layout.executorch / "CMakeLists.txt").write_text("patched\n")  # e.g. the patch series
    populate(layout, [mirrors])  # cached: not rewritten
    assert (layout.executorch / "CMakeLists.txt").read_text() == "patched\n"


def test_a_submodule_added_to_the_lock_is_written_into_the_cached_tree(tmp_path):
    mirrors = tmp_path / "mirrors"
    et = _repo(mirrors / "pytorch+executorch", {"CMakeLists.txt": "project(et)\n"})
    sub = _repo(mirrors / "acme+dep", {"dep.h": "// dep\n"})
    fft = _repo(mirrors / "acme+fft", {"fft.h": "// fft\n"})
    dep = PinnedSource("third-party/dep", "https://github.com/acme/dep.git", sub)
    old = SourceLock("https://github.com/pytorch/executorch.git", "t", et, "w", "", (dep,))
    populate(SourceLayout(tmp_path / "cache", old), [mirrors])
    cmake = SourceLayout(tmp_path / "cache", old).executorch / "CMakeLists.txt"
    cmake.write_text("patched\n")  # e.g. the patch series; its build is incremental
    mtime = cmake.stat().st_mtime_ns

    # The lock gains a submodule: the cached tree is incomplete until just that one is written.
    new = SourceLock("https://github.com/pytorch/executorch.git", "t", et, "w", "",
                     (dep, PinnedSource("third-party/fft", "https://github.com/acme/fft.git", fft)))
    layout = SourceLayout(tmp_path / "cache", new)
    assert not layout.is_complete()
    populate(layout, [mirrors])
    assert layout.is_complete()
    assert (layout.executorch / "third-party/fft/fft.h").is_file()
    assert cmake.read_text() == "patched\n" and cmake.stat().st_mtime_ns == mtime


def test_a_tree_written_for_another_commit_is_rewritten(tmp_path):
    mirrors = tmp_path / "mirrors"
    et = _repo(mirrors / "pytorch+executorch", {"CMakeLists.txt": "project(et)\n"})
    sub = _repo(mirrors / "acme+dep", {"dep.h": "// dep\n"})
    other = _repo(mirrors / "acme+dep2", {"dep.h": "// dep 2\n"})
    old = SourceLock("https://github.com/pytorch/executorch.git", "t", et, "w", "",
                     (PinnedSource("third-party/dep", "https://github.com/acme/dep.git", sub),))
    populate(SourceLayout(tmp_path / "cache", old), [mirrors])
    (SourceLayout(tmp_path / "cache", old).executorch / "stale.txt").write_text("x")

    # The submodule moves to another commit: the cached tree no longer counts and is rewritten.
    new = SourceLock("https://github.com/pytorch/executorch.git", "t", et, "w", "",
                     (PinnedSource("third-party/dep", "https://github.com/acme/dep2.git", other),))
    layout = SourceLayout(tmp_path / "cache", new)
    assert SourceLayout(tmp_path / "cache", old).is_complete()
    assert not layout.is_complete()
    populate(layout, [mirrors])
    assert layout.is_complete()
    assert (layout.executorch / "third-party/dep/dep.h").read_text() == "// dep 2\n"
    assert not (layout.executorch / "stale.txt").exists()


def test_a_commit_no_mirror_holds_is_a_clear_error(tmp_path):
    mirrors = tmp_path / "mirrors"
    _repo(mirrors / "pytorch+executorch", {"a": "b"})
    lock = SourceLock("https://github.com/pytorch/executorch.git", "t", "0" * 40, "w")
    with pytest.raises(BuildError, match=r"no mirror holds .*executorch.* at 0{40}.*--source-mirror"):
        populate(SourceLayout(tmp_path / "cache", lock), [mirrors])


def test_cache_root_honours_rne_cache_dir(tmp_path):
    assert cache_root({"RNE_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache_root({}).parts[-2:] == (".cache", "rne")

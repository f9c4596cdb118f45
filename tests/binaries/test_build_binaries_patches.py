"""The patch series mechanism against a fixture tree: clean apply, idempotence, conflicts."""

import filecmp
import shutil
import subprocess
from pathlib import Path

import pytest

from rne_tools.binaries import BuildError, PatchError, apply_series, patch_series, platform_series
from rne_tools.binaries.patches import PATCHES_DIR, conflicting_files
from rne_tools.paths import REPO_ROOT

FIXTURE = Path(__file__).parents[1] / "fixtures" / "patch_tree"


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "executorch"
    shutil.copytree(FIXTURE / "tree", tree)
    return tree


def _snapshot(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def test_clean_series_applies_in_order(tmp_path):
    tree = _tree(tmp_path)
    series = patch_series(FIXTURE / "clean")
    assert [p.name for p in series] == [
        "0001-enable-vulkan-by-default.patch",
        "0002-triple-scale-and-add-header.patch",
    ]
    assert all(len(p.sha256) == 64 for p in series)

    applied = apply_series(tree, series)

    assert applied == [p.name for p in series]
    assert '"Build the Vulkan backend" ON' in (tree / "CMakeLists.txt").read_text()
    assert "return x * 3;" in (tree / "src" / "kernel.cpp").read_text()
    assert (tree / "src" / "kernel.h").read_text().startswith("#pragma once")


def test_reapplying_is_a_no_op(tmp_path):
    tree = _tree(tmp_path)
    series = patch_series(FIXTURE / "clean")
    apply_series(tree, series)
    before = _snapshot(tree)

    assert apply_series(tree, series) == []
    assert _snapshot(tree) == before


def test_dropped_or_changed_patches_are_reverted_on_the_next_run(tmp_path):
    """A reused tree (the cached source build) never keeps a patch the series no longer has:
    the recorded copy of each patch from the first dropped or changed one is reverted."""
    pristine = _tree(tmp_path)
    shutil.copytree(pristine, tmp_path / "pristine")
    series = patch_series(FIXTURE / "clean")
    apply_series(pristine, series)

    # The second patch is dropped from the series (and its file deleted): the tree is as if
    # only the first had been applied.
    first_only = tmp_path / "first_only"
    _tree(tmp_path / "ref")
    shutil.copytree(tmp_path / "ref" / "executorch", first_only)
    apply_series(first_only, series[:1])
    assert apply_series(pristine, series[:1]) == []
    assert _snapshot(pristine) == _snapshot(first_only)
    assert "return x * 3;" not in (pristine / "src" / "kernel.cpp").read_text()

    # An empty series restores the original tree, apart from the (now empty) record.
    apply_series(pristine, [])
    original = _snapshot(tmp_path / "pristine")
    assert {k: v for k, v in _snapshot(pristine).items() if not k.startswith(".rne-patches")} \
        == original

    # A patch whose contents changed under the same name is reverted and applied again.
    apply_series(pristine, series)
    edited = tmp_path / "patches"
    edited.mkdir()
    for patch in series:
        text = patch.path.read_text()
        if patch is series[1]:
            text = text.replace("x * 3", "x * 4")
        (edited / patch.name).write_text(text)
    assert apply_series(pristine, patch_series(edited)) == [series[1].name]
    assert "return x * 4;" in (pristine / "src" / "kernel.cpp").read_text()


def _diff(old: Path, new: Path, name: str) -> str:
    """A git-style patch turning the file ``old`` into ``new``, both named ``name``."""
    out = subprocess.run(["git", "diff", "--no-index", str(old), str(new)],
                         capture_output=True, text=True).stdout
    return out.replace(f"a{old}", f"a/{name}").replace(f"b{new}", f"b/{name}")


def test_patches_editing_neighbouring_lines_reapply_as_a_no_op(tmp_path):
    """The second patch's context covers the first one's line, so the first no longer
    reverse-applies on its own: the tree's record, not a per-patch check, says it is applied."""
    tree = tmp_path / "executorch"
    tree.mkdir()
    (tree / "list.txt").write_text("set(\n  b\n  c\n)\n")
    steps = [tmp_path / "one.txt", tmp_path / "two.txt"]
    steps[0].write_text("set(\n  a1\n  b\n  c\n)\n")
    steps[1].write_text("set(\n  a1\n  a2\n  b\n  c\n)\n")
    series_dir = tmp_path / "series"
    series_dir.mkdir()
    (series_dir / "0001-a1.patch").write_text(_diff(tree / "list.txt", steps[0], "list.txt"))
    (series_dir / "0002-a2.patch").write_text(_diff(steps[0], steps[1], "list.txt"))
    series = patch_series(series_dir)
    assert apply_series(tree, series) == ["0001-a1.patch", "0002-a2.patch"]
    assert subprocess.run(["git", "apply", "--reverse", "--check", str(series[0].path)],
                          cwd=tree, capture_output=True).returncode != 0  # hidden by 0002

    assert apply_series(tree, series) == []
    assert (tree / "list.txt").read_text() == steps[1].read_text()
    apply_series(tree, [])
    assert (tree / "list.txt").read_text() == "set(\n  b\n  c\n)\n"


def test_dropping_a_patch_that_adds_an_mlx_patch_takes_it_out_of_mlx(tmp_path):
    """ExecuTorch's apply.sh applies an MLX patch that ours added to the MLX submodule, forward
    only: dropping ours from the series must revert that change in MLX as well."""
    tree = tmp_path / "executorch"
    mlx = tree / "backends/mlx/third-party/mlx"
    mlx.mkdir(parents=True)
    (tree / "backends/mlx/patches").mkdir()
    (mlx / "qmm.cpp").write_text("acc_t = T;\nreturn acc;\n")
    changed = tmp_path / "qmm.cpp"
    changed.write_text("acc_t = float;\nreturn acc;\n")
    inner = _diff(mlx / "qmm.cpp", changed, "qmm.cpp")
    assert "acc_t = float" in inner
    empty, inner_file = tmp_path / "empty", tmp_path / "inner.patch"
    empty.write_text("")
    inner_file.write_text(inner)
    outer = _diff(empty, inner_file, "backends/mlx/patches/qmm_float.patch").replace(
        "--- a/backends/mlx/patches/qmm_float.patch", "--- /dev/null").replace(
        "index ", "new file mode 100644\nindex ", 1)
    series_dir = tmp_path / "series"
    series_dir.mkdir()
    (series_dir / "0001-mlx-qmm-float.patch").write_text(outer)
    series = patch_series(series_dir)

    assert apply_series(tree, series) == ["0001-mlx-qmm-float.patch"]
    subprocess.run(["git", "apply", str(tree / "backends/mlx/patches/qmm_float.patch")], cwd=mlx,
                   check=True)  # what apply.sh does at build time
    assert "acc_t = float" in (mlx / "qmm.cpp").read_text()

    apply_series(tree, [])
    assert not (tree / "backends/mlx/patches/qmm_float.patch").exists()
    assert (mlx / "qmm.cpp").read_text() == "acc_t = T;\nreturn acc;\n"


def test_a_patch_adds_a_repository_file_by_reference(tmp_path):
    """``Adds-File:`` puts a file of this repository into the tree without a copy in the
    patch: applying adds its current contents, the patch's hash follows them, and a changed
    file replaces the old one in a reused tree (the recorded text is reverted first)."""
    tree = _tree(tmp_path)
    repo = tmp_path / "repo"
    (repo / "cpp").mkdir(parents=True)
    kernel = repo / "cpp" / "span.h"
    kernel.write_text("#pragma once\nint span();\n")
    series_dir = tmp_path / "series"
    series_dir.mkdir()
    edit = (FIXTURE / "clean" / "0001-enable-vulkan-by-default.patch").read_text()
    (series_dir / "0001-span.patch").write_text(
        "Subject: [PATCH] the span kernel\n\nAdds-File: src/rne_span.h from cpp/span.h\n\n" + edit)
    first = patch_series(series_dir, repo)

    assert apply_series(tree, first) == ["0001-span.patch"]
    assert (tree / "src" / "rne_span.h").read_text() == kernel.read_text()
    assert '"Build the Vulkan backend" ON' in (tree / "CMakeLists.txt").read_text()
    assert apply_series(tree, first) == []

    kernel.write_text("#pragma once\nint span(int keys);\n")
    second = patch_series(series_dir, repo)
    assert second[0].sha256 != first[0].sha256
    assert apply_series(tree, second) == ["0001-span.patch"]
    assert (tree / "src" / "rne_span.h").read_text() == kernel.read_text()

    apply_series(tree, [])
    assert not (tree / "src" / "rne_span.h").exists()
    assert '"Build the Vulkan backend" OFF' in (tree / "CMakeLists.txt").read_text()


def test_adds_file_must_name_a_repository_file(tmp_path):
    (tmp_path / "0001-x.patch").write_text("Adds-File: src/x.h from cpp/missing.h\n")
    with pytest.raises(BuildError, match="cpp/missing.h"):
        patch_series(tmp_path, tmp_path)


def test_conflict_names_patch_and_file_and_leaves_tree_untouched(tmp_path):
    tree = _tree(tmp_path)
    before = _snapshot(tree)
    series = patch_series(FIXTURE / "conflict")

    with pytest.raises(PatchError) as info:
        apply_series(tree, series)

    err = info.value
    assert err.patch == "0002-upstream-drifted.patch"
    assert err.files == ["src/kernel.cpp"]
    assert "0002-upstream-drifted.patch" in str(err) and "src/kernel.cpp" in str(err)
    # 0001 applied cleanly before 0002 failed; all-or-nothing reverted it.
    assert _snapshot(tree) == before
    assert not filecmp.dircmp(tree, FIXTURE / "tree").diff_files


def test_conflict_on_missing_file_is_named(tmp_path):
    tree = _tree(tmp_path)
    (tree / "src" / "kernel.cpp").unlink()
    with pytest.raises(PatchError) as info:
        apply_series(tree, patch_series(FIXTURE / "clean"))
    assert info.value.patch == "0002-triple-scale-and-add-header.patch"
    assert info.value.files == ["src/kernel.cpp"]
    assert '"Build the Vulkan backend" OFF' in (tree / "CMakeLists.txt").read_text()


def test_conflicting_files_parses_git_messages():
    stderr = (
        "error: patch failed: backends/vulkan/CMakeLists.txt:12\n"
        "error: backends/vulkan/CMakeLists.txt: patch does not apply\n"
        "error: extension/android/jni.cpp: No such file or directory\n"
    )
    assert conflicting_files(stderr) == ["backends/vulkan/CMakeLists.txt", "extension/android/jni.cpp"]


def test_badly_named_patch_is_rejected(tmp_path):
    (tmp_path / "fix-vulkan.patch").write_text("")
    with pytest.raises(BuildError, match="NNNN-short-name.patch"):
        patch_series(tmp_path)


def test_subdirectory_of_a_git_work_tree_is_refused(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree = tmp_path / "nested"
    shutil.copytree(FIXTURE / "tree", tree)
    with pytest.raises(BuildError, match="subdirectory of the git work tree"):
        apply_series(tree, patch_series(FIXTURE / "clean"))


def test_project_series_is_well_formed():
    # The real series (possibly empty) must parse: names ordered, hashes computed.
    series = patch_series(PATCHES_DIR)
    assert [p.name for p in series] == sorted(p.name for p in series)


def test_the_source_build_gets_the_host_builds_attention_kernel():
    """One attention kernel source: linux/0003 adds cpp/kernels/attention_span.h itself, not a
    copy, next to the op_sdpa.cpp that includes it."""
    patch = next(p for p in platform_series("linux") if p.name.startswith("linux/0003-"))
    kernel = REPO_ROOT / "packages/react-native-executorch/cpp/kernels/attention_span.h"
    added = "".join(f"+{line}" for line in kernel.read_text().splitlines(keepends=True))
    assert patch.text.decode().endswith(added)
    assert "namespace rne::attention_span" not in patch.path.read_text()
    assert '#include "rne_attention_span.h"' in patch.path.read_text()

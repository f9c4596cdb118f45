"""Rebuild the native ExecuTorch binaries from source, reproducibly.

    python tools/build_binaries.py --platform android --abi arm64-v8a --dry-run
    python tools/build_binaries.py --platform ios
    python tools/build_binaries.py --platform host        # what CI runs
    python tools/build_binaries.py --platform linux --source-mirror DIR   # from source, here
    python tools/build_binaries.py --platform linux-arm64   # cross-built, tested under qemu
    python tools/build_binaries.py --platform android --verify

See docs/building-binaries.md.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import click

from rne_tools.binaries import (
    ANDROID_ABIS,
    PLATFORMS,
    BuildContext,
    BuildError,
    build_plan,
    execute,
    load_lock,
    platform_series,
    preflight,
    verify_manifest,
)
from rne_tools.binaries.executor import build_env, stable_interpreter
from rne_tools.binaries.plan import Plan, expand
from rne_tools.binaries.platforms import (
    ANDROID_BUILD_COMPONENTS,
    LINUX_BUILD,
    LINUX_COMPONENTS,
    manifest_path,
)
from rne_tools.binaries.source_cache import SourceLayout, populate
from rne_tools.binaries.wheel_sdk import load_pin
from rne_tools.paths import CACHE_DIR, REPO_ROOT, cache_root


def _source_dir(source: Path | None) -> Path:
    if source is None:
        return CACHE_DIR / "executorch-src"
    source = source.resolve()
    if not (source / "CMakeLists.txt").is_file() or not (source / "tools" / "cmake").is_dir():
        raise BuildError(
            f"--source {source} is not an ExecuTorch checkout (no CMakeLists.txt and tools/cmake/); "
            "pass the top-level directory of a `git clone --recursive` of pytorch/executorch"
        )
    return source


def _note_unlocked_source(source: Path, locked: str) -> None:
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"],
                          capture_output=True, text=True)
    commit = head.stdout.strip() if head.returncode == 0 else "(not a git checkout)"
    if commit != locked:
        click.echo(f"note: --source {source} is at {commit}, not the locked {locked}; "
                   "the manifest will record matches_lock: false", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--platform", "platform", type=click.Choice(PLATFORMS), required=True)
@click.option("--abi", "abis", multiple=True, type=click.Choice(ANDROID_ABIS),
              help="Android ABI to build (repeatable; default: all).")
@click.option("--source", type=click.Path(path_type=Path, file_okay=False),
              help="Use this ExecuTorch checkout as is instead of fetching the locked commit.")
@click.option("--ref", help="Fetch this git ref instead of the commit in third-party/executorch.lock.json.")
@click.option("--source-mirror", "mirrors", multiple=True,
              type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="linux: a git mirror, or a directory of mirrors named owner+name[/repo], to "
                   "write the locked sources from into the cache (repeatable; once is enough).")
@click.option("--components",
              help="linux, android: what the ExecuTorch build holds, comma-separated (default: "
                   f"all; linux: {','.join(LINUX_COMPONENTS)}; android: "
                   f"{','.join(ANDROID_BUILD_COMPONENTS)}). An app that ships no Vulkan model "
                   "builds Android without vulkan.")
@click.option("--from-source", is_flag=True,
              help="linux-arm64: cross-build ExecuTorch from the locked source in the cache "
                   "(as --platform linux has it) instead of linking the release's aarch64 SDK.")
@click.option("--jobs", "-j", type=int, default=os.cpu_count() or 1, show_default=True,
              help="Parallel build jobs.")
@click.option("--dry-run", is_flag=True, help="Print the exact ordered commands and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: print the plan as JSON.")
@click.option("--verify", is_flag=True,
              help="Check the staged artifacts against the platform's manifest and exit.")
@click.option("--verbose", "-v", is_flag=True, help="Stream every command's output.")
def main(platform: str, abis: tuple[str, ...], source: Path | None, ref: str | None,
         mirrors: tuple[Path, ...], components: str | None, from_source: bool, jobs: int,
         dry_run: bool, as_json: bool, verify: bool, verbose: bool) -> None:
    """Build ExecuTorch for --platform and stage it under third-party/ with a manifest."""
    chosen = None if components is None else tuple(c for c in components.split(",") if c)
    try:
        if from_source and platform != "linux-arm64":
            raise BuildError("--from-source only applies to --platform linux-arm64 "
                             "(--platform linux always builds from source)")
        if chosen is not None and platform not in ("linux", "android"):
            raise BuildError("--components only applies to --platform linux and android")
        if platform == "linux":
            _main_linux(mirrors, chosen, jobs, dry_run, as_json, source, ref, verbose)
            return
        if mirrors:
            raise BuildError("--source-mirror only applies to --platform linux")
        if platform == "linux-arm64":
            _main_linux_arm64(jobs, dry_run, as_json, verify, source, ref, abis, from_source,
                              verbose)
            return
        _main(platform, abis, source, ref, jobs, dry_run, as_json, verify, verbose, chosen)
    except BuildError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


def _main(platform: str, abis: tuple[str, ...], source: Path | None, ref: str | None, jobs: int,
          dry_run: bool, as_json: bool, verify: bool, verbose: bool,
          components: tuple[str, ...] | None) -> None:
    if abis and platform != "android":
        raise BuildError("--abi only applies to --platform android")
    if platform == "host" and (source or ref):
        raise BuildError("--platform host builds against the pip executorch wheel; "
                         "--source/--ref do not apply")
    if source and ref:
        raise BuildError("--source uses a checkout as it is; --ref fetches one: pass only one")
    if as_json and not dry_run:
        raise BuildError("--json only applies to --dry-run")

    if verify:
        path = Path(expand(manifest_path(platform), {"$REPO": REPO_ROOT}))
        result = verify_manifest(path)
        for problem in result.problems:
            click.echo(f"MISMATCH {problem}", err=True)
        if not result.ok:
            raise BuildError(f"{len(result.problems)} problem(s) in {path}; rebuild the platform "
                             "or restore the staged files from git")
        click.echo(f"ok: {result.checked} artifact(s) match {path.relative_to(REPO_ROOT)}")
        return

    lock = load_lock()
    series = platform_series(platform)
    plan = build_plan(
        platform, lock=lock, patches=[p.name for p in series], abis=abis or ANDROID_ABIS,
        jobs=jobs, ref=ref, use_existing_source=source is not None, components=components,
    )
    if dry_run:
        click.echo(plan.dumps() if as_json else plan.render(), nl=False)
        return

    python = stable_interpreter()
    report = preflight(platform, python=python,
                       wheel=lock.wheel if platform == "host" else None,
                       env=build_env(python, os.environ))
    report.raise_if_failed()
    ndk = os.environ.get("ANDROID_NDK")
    vulkan_sdk = os.environ.get("VULKAN_SDK")
    ctx = BuildContext(
        repo=REPO_ROOT,
        build=REPO_ROOT / "build" / platform,
        python=python,
        lock=lock,
        ref=ref or lock.commit,
        source=None if platform == "host" else _source_dir(source),
        ndk=Path(ndk) if platform == "android" and ndk else None,
        vulkan_sdk=Path(vulkan_sdk) if platform == "android" and vulkan_sdk else None,
        patches=series,
        tool_versions=report.versions,
    )
    if source is not None:
        _note_unlocked_source(ctx.source, lock.commit)
    execute(plan, ctx, verbose=verbose)
    path = Path(expand(manifest_path(platform), {"$REPO": REPO_ROOT}))
    result = verify_manifest(path)
    if not result.ok:
        raise BuildError("the fresh manifest does not verify:\n" + "\n".join(result.problems))
    click.echo(f"done: {result.checked} artifact(s) recorded in {path.relative_to(REPO_ROOT)}")


def _execute_on_the_source_tree(layout: SourceLayout, plan: Plan, ctx: BuildContext,
                                verbose: bool) -> None:
    """Run ``plan``, which patches and builds in the cache's source and build trees: those are
    shared by every clone and by the linux and linux-arm64 builds, so one build at a time."""
    with open(layout.root / "linux-build.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        execute(plan, ctx, verbose=verbose)


def _main_linux(mirrors: tuple[Path, ...], components: tuple[str, ...] | None, jobs: int, dry_run: bool,
                as_json: bool, source: Path | None, ref: str | None, verbose: bool) -> None:
    """ExecuTorch from the locked source in the cache, then our C++ core against it."""
    if source or ref:
        raise BuildError("--platform linux builds the locked source from the cache; "
                         "--source/--ref do not apply (use --source-mirror to fill the cache)")
    lock = load_lock()
    series = platform_series("linux")
    plan = build_plan("linux", lock=lock, patches=[p.name for p in series], jobs=jobs,
                      components=components)
    if dry_run:
        click.echo(plan.dumps() if as_json else plan.render(), nl=False)
        return
    layout = SourceLayout(cache_root(), lock)
    if mirrors:
        for note in populate(layout, list(mirrors)):
            click.echo(f"note: {note}", err=True)
    if not layout.is_complete():
        raise BuildError(layout.missing_message())
    python = stable_interpreter()
    report = preflight("linux", python=python, env=build_env(python, os.environ))
    report.raise_if_failed()
    ctx = BuildContext(
        repo=REPO_ROOT, build=REPO_ROOT / LINUX_BUILD, python=python, lock=lock,
        ref=lock.commit, source=layout.executorch, cache=layout.root, patches=series,
        tool_versions=report.versions,
    )
    _execute_on_the_source_tree(layout, plan, ctx, verbose)
    path = Path(expand(manifest_path("linux"), {"$REPO": REPO_ROOT}))
    result = verify_manifest(path)
    if not result.ok:
        raise BuildError("the fresh manifest does not verify:\n" + "\n".join(result.problems))
    click.echo(f"done: {result.checked} artifact(s) recorded in {path.relative_to(REPO_ROOT)}")


def _main_linux_arm64(jobs: int, dry_run: bool, as_json: bool, verify: bool, source: Path | None,
                      ref: str | None, abis: tuple[str, ...], from_source: bool,
                      verbose: bool) -> None:
    """Our C++ core cross-compiled for aarch64, against the pinned aarch64 wheel's SDK or
    (``from_source``) against ExecuTorch cross-built from the locked source in the cache."""
    if source or ref or abis:
        raise BuildError("--platform linux-arm64 links the ExecuTorch release's aarch64 SDK "
                         "(third-party/executorch-sdk-aarch64.lock.json) or, with --from-source, "
                         "the locked source in the cache; --source, --ref and --abi do not apply")
    if as_json and not dry_run:
        raise BuildError("--json only applies to --dry-run")
    path = Path(expand(manifest_path("linux-arm64"), {"$REPO": REPO_ROOT}))
    if verify:
        result = verify_manifest(path)
        for problem in result.problems:
            click.echo(f"MISMATCH {problem}", err=True)
        if not result.ok:
            raise BuildError(f"{len(result.problems)} problem(s) in {path}; rebuild the platform")
        click.echo(f"ok: {result.checked} artifact(s) match {path.relative_to(REPO_ROOT)}")
        return
    lock = load_lock()
    # The arm64 source build shares the linux build's patched tree, so it has the same series.
    series = platform_series("linux") if from_source else []
    plan = build_plan("linux-arm64", lock=lock, patches=[p.name for p in series], jobs=jobs,
                      from_source=from_source)
    if dry_run:
        click.echo(plan.dumps() if as_json else plan.render(), nl=False)
        return
    layout = SourceLayout(cache_root(), lock)
    if from_source and not layout.is_complete():
        raise BuildError(layout.missing_message())
    python = stable_interpreter()
    report = preflight("linux-arm64", python=python, env=build_env(python, os.environ))
    report.raise_if_failed()
    if not from_source:
        pin = load_pin()
        report.versions["executorch (wheel)"] = f"{pin.file} sha256:{pin.sha256}"
    ctx = BuildContext(repo=REPO_ROOT, build=REPO_ROOT / "build" / "linux-arm64", python=python,
                       lock=lock, ref=lock.commit, cache=cache_root(),
                       source=layout.executorch if from_source else None, patches=series,
                       tool_versions=report.versions)
    if from_source:
        _execute_on_the_source_tree(layout, plan, ctx, verbose)
    else:
        execute(plan, ctx, verbose=verbose)
    result = verify_manifest(path)
    if not result.ok:
        raise BuildError("the fresh manifest does not verify:\n" + "\n".join(result.problems))
    click.echo(f"done: {result.checked} artifact(s) recorded in {path.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()

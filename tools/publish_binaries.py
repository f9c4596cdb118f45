#!/usr/bin/env python3
"""Publish the native binaries build_binaries.py staged, and write the package's lock of them.

python tools/publish_binaries.py --staged third-party/ios --staged third-party/android \\
    --staged build/release/android-cpu --dry-run
python tools/publish_binaries.py --staged third-party/android --staged build/release/android-cpu

Each --staged directory is one platform's staging (its manifest.json says which, and its recorded
CMake flags which backend set: "all" with Vulkan/MLX, "cpu" without). Stage the second set by
building again with `--components xnnpack` and copying the staging aside (docs/distribution.md).
Every staging is verified (manifest, sha256, 16 KB page alignment, size budget) before anything
is uploaded. The version is the package's (packages/react-native-executorch/package.json); the
artifacts go to <repo>@v<version>, and packages/react-native-executorch/binaries.lock.json records
them. The token comes from HF_TOKEN or `hf auth login`; against a Hub-compatible server without
Xet storage set HF_HUB_DISABLE_XET=1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from rne_tools.binaries.release import (
    BUDGET_PATH,
    LOCK_PATH,
    PACKAGE_DIR,
    load_budget,
    lock_document,
    package_version,
    plan_release,
    write_lock,
)
from rne_tools.errors import RneError
from rne_tools.paths import REPO_ROOT
from rne_tools.publish.binaries import DEFAULT_REPO, base_url, publish_binaries


@click.command()
@click.option("--staged", "staged", multiple=True, required=True,
              type=click.Path(path_type=Path, file_okay=False),
              help="A staged platform directory with its manifest.json (repeatable).")
@click.option("--repo", default=DEFAULT_REPO, show_default=True, help="Hub repository.")
@click.option("--endpoint", default=None,
              help="Hugging Face endpoint (default: HF_ENDPOINT or https://huggingface.co).")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False),
              default=REPO_ROOT / "build" / "release", show_default=True,
              help="Where the zips are packed.")
@click.option("--lock", "lock_path", type=click.Path(path_type=Path, dir_okay=False),
              default=LOCK_PATH, show_default=True, help="The lock file to write.")
@click.option("--package-dir", type=click.Path(path_type=Path, file_okay=False),
              default=PACKAGE_DIR, help="The npm package whose version the release is.")
@click.option("--budget", "budget_path", type=click.Path(path_type=Path, dir_okay=False),
              default=BUDGET_PATH, show_default=True, help="The artifacts' size budget.")
@click.option("--dry-run", is_flag=True,
              help="Verify and pack, print the artifacts and the lock; upload and write nothing.")
def main(staged: tuple[Path, ...], repo: str, endpoint: str | None, out_dir: Path,
         lock_path: Path, package_dir: Path, budget_path: Path, dry_run: bool) -> None:
    """Verify, pack and upload the staged binaries; then write the lock."""
    try:
        version = package_version(package_dir)
        artifacts = plan_release(list(staged), version, out_dir / version, load_budget(budget_path))
        for a in artifacts:
            click.echo(f"  {a.build.name:24} {a.size:>11} bytes  sha256 {a.sha256}  "
                       f"({a.manifest['unpacked_size']} unpacked; {', '.join(a.build.backends)})")
        sets = {(a.build.platform, a.build.backend_set) for a in artifacts}
        for platform in sorted({p for p, _ in sets}):
            missing = [s for s in ("all", "cpu") if (platform, s) not in sets]
            if missing:
                click.echo(f"note: no {platform} {' or '.join(missing)} artifact: apps asking "
                           "for that backend set will be told to build it themselves", err=True)
        if dry_run:
            from huggingface_hub import constants

            url = base_url(endpoint or constants.ENDPOINT, repo, version)
            click.echo(json.dumps(lock_document(version, url, artifacts), indent=2, sort_keys=True))
            click.echo(f"dry run: nothing uploaded, {lock_path} unchanged")
            return
        result = publish_binaries(artifacts, version, repo=repo, endpoint=endpoint)
        write_lock(lock_document(version, result.base_url, artifacts), lock_path)
    except RneError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(f"{result.repo}@{result.tag} ({result.commit[:12]}) "
               f"{'created' if result.new_tag else 'already held these binaries'}; "
               f"{lock_path} written")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Release one package version in one command: build what this host can, verify everything,
publish the native binaries and the model variants, write the lock and the registry, npm pack.

python tools/release.py --version 0.2.0 --staged build/release-staging/android-all \\
    --staged build/release-staging/android-cpu --model smollm2_135m --exports-dir exports/ --dry-run
python tools/release.py --version 0.2.0 --staged ... --model smollm2_135m --exports-dir exports/

The binaries go to <repo>@v<version> (packages/react-native-executorch/binaries.lock.json records
them), each model's variants to its own repository @v<version> (model-registry/ and the generated
TypeScript record them), and the tarball to <out-dir>. Nothing is uploaded before every artifact
and export verified and every tag was checked on the Hub; a lock or registry entry is written only
after the Hub serves exactly its bytes. Re-running after a failure finishes the release.
docs/distribution.md ("Releasing") has the steps and guarantees. The token comes from HF_TOKEN or
`hf auth login`; against a Hub-compatible server without Xet storage set HF_HUB_DISABLE_XET=1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rne_tools.runtime.quiet import configure_python_noise

configure_python_noise()  # before the imports below: torchao logs its noise on import

from rne_tools.binaries.release import BUDGET_PATH, LOCK_PATH, PACKAGE_DIR  # noqa: E402
from rne_tools.errors import RneError  # noqa: E402
from rne_tools.paths import REGISTRY_DIR, REPO_ROOT  # noqa: E402
from rne_tools.publish.binaries import DEFAULT_REPO  # noqa: E402
from rne_tools.registry import codegen  # noqa: E402
from rne_tools.release import ModelRequest, ReleaseError, release  # noqa: E402


def _models(specs: tuple[str, ...], tokenizers: tuple[str, ...]) -> list[ModelRequest]:
    requests = [ModelRequest.parse(s) for s in specs]
    dirs = {}
    for t in tokenizers:
        model_id, sep, path = t.partition("=")
        if not sep or not path:
            raise ReleaseError(f"--tokenizer-dir {t!r}: expected MODEL=DIR")
        if model_id not in {r.model_id for r in requests}:
            raise ReleaseError(f"--tokenizer-dir {t!r}: {model_id} is not among --model")
        dirs[model_id] = Path(path)
    return [ModelRequest(r.model_id, r.backends, dirs.get(r.model_id)) for r in requests]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", "version", required=True,
              help="The package version to release; package.json must already be at it.")
@click.option("--staged", multiple=True, type=click.Path(path_type=Path, file_okay=False),
              help="A build_binaries.py staging (third-party/ios or third-party/android, copied "
                   "aside) to release instead of building that platform's backend set (repeatable).")
@click.option("--no-build", is_flag=True, help="Build nothing; release only --staged directories.")
@click.option("--model", "model_specs", multiple=True,
              help="A registry model to publish, ID or ID:backend[,backend] (repeatable; default "
                   "variants: all of the model's).")
@click.option("--exports-dir", type=click.Path(path_type=Path, file_okay=False),
              help="Where tools/export_model.py (and export_encoder.py) wrote the verified exports.")
@click.option("--export", is_flag=True,
              help="Export the --model variants now, verified, with the registry's recipes "
                   "(reusing identical exports in the export cache), instead of --exports-dir.")
@click.option("--random-config", hidden=True,
              help="With --export: a tiny random-weight config (tests only; never a release).")
@click.option("--tokenizer-dir", "tokenizers", multiple=True,
              help="MODEL=DIR: the checkpoint directory with a model's tokenizer files (default: "
                   "the registry source's, where the tooling imports it offline).")
@click.option("--repo", default=DEFAULT_REPO, show_default=True, help="Binaries' Hub repository.")
@click.option("--endpoint", default=None,
              help="Hugging Face endpoint (default: HF_ENDPOINT or https://huggingface.co).")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False),
              default=REPO_ROOT / "build" / "release", show_default=True,
              help="Where stagings, zips and the tarball go (a temporary directory in a dry run).")
@click.option("--lock", "lock_path", type=click.Path(path_type=Path, dir_okay=False),
              default=LOCK_PATH, show_default=True, help="The binaries lock to write.")
@click.option("--budget", "budget_path", type=click.Path(path_type=Path, dir_okay=False),
              default=BUDGET_PATH, show_default=True, help="The artifacts' size budget.")
@click.option("--registry-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              default=REGISTRY_DIR, show_default=True, help="The registry to update.")
@click.option("--ts-output", type=click.Path(path_type=Path, dir_okay=False),
              default=codegen.GENERATED_TS, help="The generated TypeScript to rewrite.")
@click.option("--no-pack", is_flag=True, help="Skip `npm pack`.")
@click.option("--allow-random-weights", is_flag=True, hidden=True,
              help="Accept exports of random-weight test configs (tests only; never a release).")
@click.option("--dry-run", is_flag=True,
              help="Verify everything, check the Hub read-only and print the plan with sizes; "
                   "build, upload and write nothing.")
def main(version: str, staged: tuple[Path, ...], no_build: bool, model_specs: tuple[str, ...],
         exports_dir: Path | None, export: bool, random_config: str | None, tokenizers: tuple[str, ...], repo: str, endpoint: str | None,
         out_dir: Path, lock_path: Path, budget_path: Path, registry_dir: Path, ts_output: Path,
         no_pack: bool, allow_random_weights: bool, dry_run: bool) -> None:
    """Release --version: binaries, model variants, lock and registry, npm tarball."""
    try:
        result = release(
            version, staged=staged, build=not no_build, models=_models(model_specs, tokenizers),
            exports_dir=exports_dir, export=export, random_config=random_config, out_dir=out_dir, repo=repo, endpoint=endpoint,
            package_dir=PACKAGE_DIR, lock_path=lock_path, budget_path=budget_path,
            registry_dir=registry_dir, ts_output=ts_output, pack=not no_pack,
            allow_random_weights=allow_random_weights, dry_run=dry_run, echo=click.echo)
    except RneError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if not dry_run:
        skipped = [f"{s.platform}-{s.backend_set}" for s in result.plan.builds if s.action == "skip"]
        click.echo(f"released {version}" + (f"; not in this release: {', '.join(skipped)}"
                                           if skipped else ""))


if __name__ == "__main__":
    main()

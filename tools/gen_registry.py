#!/usr/bin/env python3
"""Validate model-registry/*.yaml and generate the TypeScript `models` object.

python tools/gen_registry.py            # validate, then (re)write the generated file
python tools/gen_registry.py --check    # validate; exit 1 if the generated file is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rne_tools import registry
from rne_tools.errors import RegistryError
from rne_tools.paths import REPO_ROOT


@click.command()
@click.option("--check", is_flag=True, help="Only check that the generated file is up to date.")
@click.option(
    "--registry-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=registry.REGISTRY_DIR,
    show_default=True,
    help="Directory of the family YAML files.",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=registry.GENERATED_TS,
    help="Generated TypeScript file.",
)
def main(check: bool, registry_dir: Path, output: Path) -> None:
    """Validate the model registry and generate its TypeScript `models` object."""
    try:
        reg = registry.load_registry(registry_dir)
    except RegistryError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    shown = (
        output.resolve().relative_to(REPO_ROOT)
        if output.resolve().is_relative_to(REPO_ROOT)
        else output
    )
    if check:
        if registry.is_stale(reg, output):
            click.echo(
                f"error: {shown} is stale: it does not match model-registry/*.yaml.\n"
                f"Regenerate it with: {registry.REGENERATE_COMMAND}",
                err=True,
            )
            sys.exit(1)
        click.echo(f"ok: {len(reg.models)} models valid; {shown} is up to date")
        return
    changed = registry.write_typescript(reg, output)
    click.echo(f"{'wrote' if changed else 'unchanged'}: {shown} ({len(reg.models)} models)")


if __name__ == "__main__":
    main()

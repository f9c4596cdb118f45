#!/usr/bin/env python3
"""Validate model-registry/ and generate what the npm package derives from it.

From the model family files (*.yaml): the TypeScript `models` object; from the backend catalog
(backends.yaml): the TypeScript backend tables and the C++ header of the native seam; from the
sampler's options (cpp/runner/sampler_options.yaml): the ranges C++ and TypeScript check; from
Gemma 4's chat syntax (chat_formats/gemma4.yaml): its markers for both.

python tools/gen_registry.py            # validate, then (re)write the generated files
python tools/gen_registry.py --check    # validate; exit 1 if a generated file is stale
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from rne_tools import backend_catalog, registry
from rne_tools.errors import RegistryError
from rne_tools.paths import PACKAGE_DIR, REGISTRY_DIR, REPO_ROOT
from rne_tools.registry import codegen
from rne_tools.registry.chat_formats import load_chat_format
from rne_tools.registry.sampler_options import load_sampler_options


def _shown(path: Path) -> Path:
    resolved = path.resolve()
    return resolved.relative_to(REPO_ROOT) if resolved.is_relative_to(REPO_ROOT) else path


def _fail(exc: Exception) -> NoReturn:
    """Exit 1 with one ``error:`` line per problem (``RegistryError`` lists them as
    ``header:\n  - problem``), each naming its file and field."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        lines = [f"cannot write the generated files: {where}{exc.strerror or exc}"]
    else:
        text = str(exc)
        problems = [line[4:] for line in text.splitlines() if line.startswith("  - ")]
        lines = problems or [" ".join(text.split())]
    for line in lines:
        click.echo(f"error: {line}", err=True)
    sys.exit(1)


@click.command()
@click.option("--check", is_flag=True, help="Only check that the generated files are up to date.")
@click.option(
    "--registry-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=REGISTRY_DIR,
    show_default=True,
    help="Directory of the family YAML files.",
)
@click.option(
    "--package-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=PACKAGE_DIR,
    help="The npm package the generated files go into (at their usual places in it).",
)
def main(check: bool, registry_dir: Path, package_dir: Path) -> None:
    """Validate the model registry and the backend catalog, and generate their outputs."""
    try:
        catalog = backend_catalog.load_catalog()
        reg = registry.load_registry(registry_dir)
        load_sampler_options()
        load_chat_format("gemma4")
    except RegistryError as exc:
        _fail(exc)
    valid = f"{len(reg.models)} models and {len(catalog.backends)} backends valid"
    if check:
        stale = codegen.stale_files(reg, package_dir)
        if stale:
            for path in stale:
                click.echo(
                    f"error: {_shown(path)} is stale: it does not match its declaration.",
                    err=True,
                )
            click.echo(f"Regenerate with: {codegen.REGENERATE_COMMAND}", err=True)
            sys.exit(1)
        click.echo(f"ok: {valid}; the generated files are up to date")
        return
    try:
        changed = codegen.write_generated(reg, package_dir)
    except OSError as exc:
        _fail(exc)
    for path in codegen.generated_files(reg, package_dir):
        click.echo(f"{'wrote' if path in changed else 'unchanged'}: {_shown(path)}")
    click.echo(valid)


if __name__ == "__main__":
    main()

"""Build the pinned Hermes (third-party/hermes.lock.json) into the cache, for the Hermes host check.

    python tools/build_hermes.py --source-mirror DIR   # first time: writes the source, builds
    python tools/build_hermes.py                       # later: reuses (or finishes) the build
    python tools/build_hermes.py --print-paths         # the paths CMake and the test need, JSON

Builds only libhermesvm.so and hermesc, Release, niced, with ninja. On a shared 2-core machine
this takes far longer than a cold CI run can spare (docs/distribution.md), so scripts/setup.sh
does not run it; tests/package/test_hermes_host.py runs where it was built and prints one NOT RUN line
elsewhere.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from rne_tools.binaries import BuildError
from rne_tools.binaries.hermes import HermesLayout, build, load_hermes_lock, populate_source
from rne_tools.paths import cache_root


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--source-mirror", "mirrors", multiple=True,
              type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="A git mirror of facebook/hermes, or a directory of mirrors named "
                   "owner+name[/repo]; needed once, to write the locked source into the cache.")
@click.option("--jobs", default=2, show_default=True, type=click.IntRange(1))
@click.option("--nice", default=15, show_default=True, type=click.IntRange(0, 19),
              help="Niceness of the compilers (the build shares the machine).")
@click.option("--print-paths", is_flag=True,
              help="Print the built Hermes's paths as JSON and exit; fail if it is not built.")
def main(mirrors: tuple[Path, ...], jobs: int, nice: int, print_paths: bool) -> None:
    layout = HermesLayout(cache_root(), load_hermes_lock())
    try:
        if print_paths:
            if layout.built() is None:
                raise BuildError(layout.missing_message())
        else:
            populate_source(layout, mirrors)
            bin_dir = Path(sys.executable).parent  # the venv's cmake and ninja
            stamp = build(layout, cmake=bin_dir / "cmake", ninja=bin_dir / "ninja", jobs=jobs,
                          nice=nice)
            click.echo(f"Hermes {layout.lock.tag} built (bytecode v{stamp['bytecode_version']}); "
                       f"this run took {stamp['last_run_seconds']} s", err=True)
    except BuildError as e:
        raise click.ClickException(str(e)) from None
    click.echo(json.dumps({"source": str(layout.source), "vm_library": str(layout.vm_library),
                           "hermesc": str(layout.hermesc)}, indent=2))


if __name__ == "__main__":
    main()

"""Export Gemma 4's vision encoder to a verified ExecuTorch .pte and a JSON export report.

Example:
    .venv/bin/python tools/export_encoder.py --random-config tiny --max-soft-tokens 280 \\
        --output-dir exports/

Writes <output-dir>/gemma4_<config>_vision_xnnpack_fp32_<max_soft_tokens>.pte and
.report.json: a `vision_encoder` method (XNNPACK, fp32) verified against transformers' own image
features (see rne_tools.encoders.export). Exit status 1 on bad input or a failed verification
(nothing is written then). Random configs only for now (docs/multimodal.md).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from rne_tools.runtime.quiet import configure_python_noise, filtered_native_stderr

configure_python_noise()  # before the imports below: torchao logs its noise on import

from rne_tools.encoders.export import (  # noqa: E402
    cached_vision_encoder,
    export_vision_encoder,
)
from rne_tools.encoders.gemma4_vision import RANDOM_CONFIGS, SOFT_TOKEN_BUDGETS  # noqa: E402
from rne_tools.errors import RneError  # noqa: E402


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--random-config", "config", type=click.Choice(sorted(RANDOM_CONFIGS)), default="tiny",
    show_default=True, help="Named random multimodal Gemma 4 config.",
)
@click.option(
    "--max-soft-tokens", type=click.Choice([str(b) for b in SOFT_TOKEN_BUDGETS]), default="280",
    show_default=True, help="The image processor's soft-token budget the program is fixed to.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the weights.")
@click.option(
    "--output-dir", "--out", "output_dir", type=click.Path(path_type=Path), default=None,
    help="Where to write the .pte and report (required unless --cached).",
)
@click.option(
    "--cached", is_flag=True,
    help="Reuse an identical verified export from ~/.cache/rne/encoders (exporting it if "
    "absent); prints the .pte path. With --output-dir the files are also copied.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def main(config: str, max_soft_tokens: str, seed: int, output_dir: Path | None, cached: bool,
         quiet: bool) -> None:
    """Export, lower and verify one vision encoder."""
    if not cached and output_dir is None:
        raise click.UsageError("--output-dir is required (or use --cached).")
    budget = int(max_soft_tokens)
    with filtered_native_stderr():
        try:
            if cached:
                result = cached_vision_encoder(config, max_soft_tokens=budget, seed=seed,
                                               progress=not quiet)
                if output_dir is not None:
                    output_dir.mkdir(parents=True, exist_ok=True)
                    for path in (result.pte_path, result.report_path):
                        shutil.copyfile(path, output_dir / path.name)
            else:
                result = export_vision_encoder(config, output_dir, max_soft_tokens=budget,
                                               seed=seed, progress=not quiet)
        except RneError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
    report, v = result.report, result.report["verification"]
    click.echo(
        f"{result.pte_path.name}: {report['size'] / 1e6:.2f} MB, "
        f"{report['delegation']['delegated_share']:.0%} of nodes delegated, exported in "
        f"{report['export_seconds']:.0f} s, verification {v['status']} (max |diff| "
        f"{v['max_abs_diff']:.3g}, {v['relative']:.2g} x the embeddings' std)",
        err=True,
    )
    click.echo(str(result.pte_path))


if __name__ == "__main__":
    main()

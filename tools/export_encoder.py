"""Export one of Gemma 4's encoders to a verified ExecuTorch .pte and a JSON export report.

Examples:
    .venv/bin/python tools/export_encoder.py --random-config tiny --max-soft-tokens 280 \\
        --output-dir exports/
    .venv/bin/python tools/export_encoder.py --encoder audio --max-audio-seconds 30 --cached
    .venv/bin/python tools/export_encoder.py --random-config e2b --quantization 8w --out exports/

Vision writes <output-dir>/gemma4_<config>_vision_xnnpack_<quantization>_<max_soft_tokens>.pte
and .report.json: a `vision_encoder` method (XNNPACK) verified against transformers' own image
features (see rne_tools.encoders.export). Audio writes
gemma4_<config>_audio_xnnpack_<quantization>_<seconds>s.pte: `speech_transform` (waveform to
log-mel features) and `audio_encoder` methods verified against transformers' feature extractor
and audio features (rne_tools.encoders.audio_export). --quantization quantizes the encoder's
linears (fp32 keeps them float); a quantized program is verified against the fp32 eager model
with its quantization's bound. Exit status 1 on bad input or a failed verification (nothing is
written then). Random configs only for now (docs/multimodal.md).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from rne_tools.runtime.quiet import configure_python_noise, filtered_native_stderr

configure_python_noise()  # before the imports below: torchao logs its noise on import

from rne_tools.encoders.audio_export import (  # noqa: E402
    cached_audio_encoder,
    export_audio_encoder,
)
from rne_tools.encoders.export import (  # noqa: E402
    QUANTIZATIONS,
    EncoderExportResult,
    cached_vision_encoder,
    export_vision_encoder,
)
from rne_tools.encoders.gemma4_audio import MAX_SECONDS  # noqa: E402
from rne_tools.encoders.gemma4_reference import RANDOM_CONFIGS  # noqa: E402
from rne_tools.encoders.gemma4_vision import SOFT_TOKEN_BUDGETS  # noqa: E402
from rne_tools.errors import RneError  # noqa: E402


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--encoder", type=click.Choice(["vision", "audio"]), default="vision", show_default=True,
    help="Which encoder to export.",
)
@click.option(
    "--random-config", "config", type=click.Choice(sorted(RANDOM_CONFIGS)), default="tiny",
    show_default=True, help="Named random multimodal Gemma 4 config.",
)
@click.option(
    "--max-soft-tokens", type=click.Choice([str(b) for b in SOFT_TOKEN_BUDGETS]), default="280",
    show_default=True, help="Vision: the image processor's soft-token budget the program is "
    "fixed to.",
)
@click.option(
    "--max-audio-seconds", type=click.IntRange(1, MAX_SECONDS), default=MAX_SECONDS,
    show_default=True, help="Audio: the longest clip the program takes (fixed input length).",
)
@click.option(
    "--quantization", type=click.Choice(QUANTIZATIONS), default="fp32", show_default=True,
    help="The encoder's linears: fp32, 8w (int8 weights, float activations), 8da8w / 8da4w "
    "(int8 dynamic activations, int8 / int4 grouped weights).",
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
def main(encoder: str, config: str, max_soft_tokens: str, max_audio_seconds: int,
         quantization: str, seed: int, output_dir: Path | None, cached: bool,
         quiet: bool) -> None:
    """Export, lower and verify one encoder."""
    if not cached and output_dir is None:
        raise click.UsageError("--output-dir is required (or use --cached).")
    budget = int(max_soft_tokens)
    with filtered_native_stderr():
        try:
            result: EncoderExportResult
            if encoder == "audio" and cached:
                result = cached_audio_encoder(config, max_seconds=max_audio_seconds,
                                              quantization=quantization, seed=seed,
                                              progress=not quiet)
            elif encoder == "audio":
                result = export_audio_encoder(config, output_dir, max_seconds=max_audio_seconds,
                                              quantization=quantization, seed=seed,
                                              progress=not quiet)
            elif cached:
                result = cached_vision_encoder(config, max_soft_tokens=budget,
                                               quantization=quantization, seed=seed,
                                               progress=not quiet)
            else:
                result = export_vision_encoder(config, output_dir, max_soft_tokens=budget,
                                               quantization=quantization, seed=seed,
                                               progress=not quiet)
            if cached and output_dir is not None:
                output_dir.mkdir(parents=True, exist_ok=True)
                for path in (result.pte_path, result.report_path):
                    shutil.copyfile(path, output_dir / path.name)
        except RneError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
    report, v = result.report, result.report["verification"]
    click.echo(
        f"{result.pte_path.name}: {report['size'] / 1e6:.2f} MB, "
        f"{report['delegation']['delegated_share']:.0%} of nodes delegated, exported in "
        f"{report['export_seconds']:.0f} s, verification {v['status']} (max |diff| "
        f"{v['max_abs_diff']:.3g}, {v['relative']:.2g} x the embeddings' std"
        + ("" if quantization == "fp32" else
           f"; against fp32 eager {v['fp32_agreement']['relative']:.2g} x the std, worst row "
           f"cosine {v['fp32_agreement']['min_cosine']:.6f}")
        + (f"; features max |diff| {v['feature_max_abs_diff']:.3g}" if encoder == "audio"
           else "") + ")",
        err=True,
    )
    click.echo(str(result.pte_path))


if __name__ == "__main__":
    main()

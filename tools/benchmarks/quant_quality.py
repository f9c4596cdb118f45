"""Print the top-1 agreement of a quantized SmolLM2 with fp32 (both XNNPACK, exported and
cached), teacher-forced over each fp32 answer up to its end-of-sequence token.

.venv/bin/python tools/benchmarks/quant_quality.py [--quantization 8w|8da4w|8da8w]
    [--embedding-quantization 8w|4w] [--group-size N] [--embedding-group-size N]
    [--prompts demo|more|all]
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

# Run as a script from anywhere: make tools/ importable like the CLIs directly under it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rne_tools.runtime.quiet import configure_python_noise, filtered_native_stderr  # noqa: E402

configure_python_noise()  # before the imports below: torchao logs its noise on import

from rne_tools.checks.quality import MORE_PROMPTS, PROMPTS, top1_agreement  # noqa: E402
from rne_tools.export import cached_export  # noqa: E402
from rne_tools.gguf_import import default_checkpoint  # noqa: E402


@click.command()
@click.option(
    "--quantization", type=click.Choice(["8w", "8da4w", "8da8w"]), default="8da4w", show_default=True
)
@click.option(
    "--embedding-quantization", type=click.Choice(["8w", "4w"]), default="8w", show_default=True
)
@click.option(
    "--group-size", type=int, default=32, show_default=True, help="Group of 4-bit linears."
)
@click.option(
    "--embedding-group-size", type=int, default=None, help="Group of 4-bit tables (default: the linears')."
)
@click.option(
    "--prompts",
    "prompt_set",
    type=click.Choice(["demo", "more", "all"]),
    default="all",
    show_default=True,
    help="demo: the 10 prompts the recipes were chosen on; more: 40 others; all: both.",
)
@click.option("--new-tokens", type=int, default=32, show_default=True)
@click.option(
    "--fp32",
    "fp32_pte",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Use this fp32 .pte instead of the cached export.",
)
@click.option(
    "--quantized",
    "quantized_pte",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Use this quantized .pte instead of the cached export.",
)
def main(
    quantization: str,
    embedding_quantization: str,
    group_size: int,
    embedding_group_size: int | None,
    prompt_set: str,
    new_tokens: int,
    fp32_pte: Path | None,
    quantized_pte: Path | None,
) -> None:
    """Top-1 agreement of a quantized SmolLM2-135M-Instruct vs fp32 over a fixed prompt set."""
    prompts = {"demo": PROMPTS, "more": MORE_PROMPTS, "all": PROMPTS + MORE_PROMPTS}[prompt_set]
    with filtered_native_stderr():
        if fp32_pte is None:
            fp32_pte = cached_export("smollm2_135m", "xnnpack", "fp32").pte_path
        if quantized_pte is None:
            quantized_pte = cached_export(
                "smollm2_135m",
                "xnnpack",
                quantization,
                embedding_quantization=embedding_quantization,
                group_size=group_size,
                embedding_group_size=embedding_group_size,
            ).pte_path
        checkpoint = default_checkpoint("smollm2_135m")
        result = top1_agreement(fp32_pte, quantized_pte, checkpoint, prompts, new_tokens)
    click.echo(f"prompts: {len(prompts)} ({prompt_set}), positions: {result.positions}")
    click.echo("per prompt: " + ", ".join(f"{a:.2f}" for a in result.per_prompt))
    click.echo(
        f"top-1 agreement {quantization} (emb {embedding_quantization}, groups {group_size}/"
        f"{embedding_group_size or group_size}) vs fp32: "
        f"{result.agreement:.4f} ({result.matched}/{result.positions})"
    )


if __name__ == "__main__":
    main()

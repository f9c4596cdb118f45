"""Per-token decode cost by context fill, for each backend the source-built runtime executes
(issue 12): does decode cost follow the tokens in the cache, or the export's ``max_context``?

Prints numbers; asserts nothing. For each variant, the tiny random Gemma 4 (every E2B feature:
sliding + full layers, KV sharing, GQA), or with ``--layers N`` E2B's real widths at N layers
(random weights), is exported at ``--max-context`` (cached), and our
runner on ExecuTorch built from source (``build/linux``, tools/build_binaries.py --platform
linux) decodes ``--new-tokens`` after prompts of each ``--fills`` length. Vulkan runs on
lavapipe (a CPU-emulated device) and MLX on its CPU backend here, so compare growth (in
brackets: decode ms/token relative to the smallest fill), not absolute speed across backends.
The last column decodes after the smallest fill with a ``--short-context`` export instead: what
a large ``max_context`` costs a short chat (in brackets: its speed over the large export's).
Writes a PNG of decode tok/s against fill (``--plot``).

    .venv/bin/python tools/benchmarks/backend_context_benchmark.py \
        [--variants xnnpack:fp32,vulkan:fp16,vulkan:8da4w] [--fills 128,1000,4000] [--layers 5]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from decode_context_benchmark import plot  # noqa: E402
from export_benchmark import gemma4_e2b_config  # noqa: E402
from runner_benchmark import run_json  # noqa: E402

from rne_tools.runtime.quiet import configure_python_noise, filtered_native_stderr  # noqa: E402

configure_python_noise()  # before the imports below: torchao logs its noise on import

from rne_tools.checks import cpp_runtime  # noqa: E402
from rne_tools.export import cached_export  # noqa: E402
from rne_tools.models import gemma4  # noqa: E402
from rne_tools.paths import REPO_ROOT  # noqa: E402

SOURCE_RNE_BENCH = REPO_ROOT / "build" / "linux" / "host" / "rne_bench"


def _export(backend: str, quantization: str, layers: int, max_context: int,
            max_chunk: int) -> Path:
    """The tiny Gemma 4 (``layers`` 0) or E2B's widths at ``layers`` layers, cached."""
    config = gemma4_e2b_config(layers) if layers else gemma4.RANDOM_CONFIGS["tiny"]
    extra: dict[str, Any] = {}
    if quantization in ("8da4w", "int4"):
        # Vulkan and MLX execute 4-bit embedding tables only (see their backends). The tiny
        # model's widths (64, 96) take groups of 32, not the registry's Vulkan 128; E2B's take
        # the registry variant's.
        extra["embedding_quantization"] = "4w"
        if not layers:
            extra["group_size"] = 32
    if backend == "mlx":  # MLX exports cap the prefill chunk at the sliding window
        max_chunk = min(max_chunk, config["sliding_window"])
    return cached_export("gemma4_e2b", backend, quantization,
                         random_config=config if layers else "tiny", max_context=max_context,
                         max_chunk=max_chunk, progress=False, **extra).pte_path


def _decode_tok_s(pte: Path, fill: int, new_tokens: int, repeat: int) -> float:
    stats = run_json(SOURCE_RNE_BENCH, "--model", pte, "--prompt-tokens", fill,
                     "--new-tokens", new_tokens, "--repeat", repeat, "--bare", 0)
    return stats["runner"]["decode_tok_s"]


@click.command()
@click.option("--variants", default="xnnpack:fp32,vulkan:fp16,vulkan:8da4w,mlx:int4",
              show_default=True, help="backend:quantization pairs; absent backends are skipped.")
@click.option("--fills", default="128,1000,4000", show_default=True)
@click.option("--layers", default=0, show_default=True,
              help="0: the tiny Gemma 4; N: E2B's widths at its first N layers (random weights).")
@click.option("--max-context", default=4224, show_default=True)
@click.option("--short-context", default=512, show_default=True,
              help="max_context of the export decoded after the smallest fill (0: skip).")
@click.option("--max-chunk", default=128, show_default=True)
@click.option("--new-tokens", default=32, show_default=True)
@click.option("--repeat", default=2, show_default=True, help="Best of this many runs.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path),
              help="PNG to write [default: build/benchmarks/backend_decode_vs_context.png, "
                   "with -e2b-l<N> before .png for --layers N].")
def main(variants: str, fills: str, layers: int, max_context: int, short_context: int,
         max_chunk: int, new_tokens: int, repeat: int, plot_path: Path | None) -> None:
    if not SOURCE_RNE_BENCH.is_file():
        raise click.ClickException(f"{SOURCE_RNE_BENCH} is missing: build it with "
                                   "tools/build_binaries.py --platform linux")
    fill_list = [int(f) for f in fills.split(",")]
    print(f"decode tok/s after each fill (export max_context {max_context}); "
          "in brackets: ms/token relative to the first fill")
    short = f"{short_context}-slot@{fill_list[0]}" if short_context else ""
    print(f"{'variant':16}" + "".join(f"{f:>18}" for f in fill_list) + f"{short:>22}")
    best: dict[str, dict[int, dict[str, float]]] = {}
    for variant in variants.split(","):
        backend, quantization = variant.split(":")
        if not cpp_runtime.has_backend(backend):
            print(f"{variant:16}  not run: the source-built runtime has no {backend} delegate")
            continue
        pte = _export(backend, quantization, layers, max_context, max_chunk)
        rates = [_decode_tok_s(pte, fill, new_tokens, repeat) for fill in fill_list]
        best[variant] = {fill: {"decode_tok_s": r} for fill, r in zip(fill_list, rates, strict=True)}
        cells = [f"{r:8.1f} ({rates[0] / r:4.2f}x)" for r in rates]
        if short_context:
            small = _export(backend, quantization, layers, short_context,
                            min(max_chunk, short_context))
            rate = _decode_tok_s(small, fill_list[0], new_tokens, repeat)
            cells.append(f"    {rate:8.1f} ({rate / rates[0]:4.2f}x)")
        print(f"{variant:16}" + "".join(f"{c:>18}" for c in cells), flush=True)
    if best:
        if plot_path is None:
            suffix = f"-e2b-l{layers}" if layers else ""
            plot_path = REPO_ROOT / "build" / "benchmarks" / f"backend_decode_vs_context{suffix}.png"
        plot_path.parent.mkdir(parents=True, exist_ok=True)
        model = f"Gemma 4 E2B widths, {layers} layers" if layers else "tiny Gemma 4"
        plot(best, fill_list, plot_path, f"{model}, {max_context}-slot exports", log_y=True)
        print(f"plot: {plot_path}")


if __name__ == "__main__":
    with filtered_native_stderr():
        main()

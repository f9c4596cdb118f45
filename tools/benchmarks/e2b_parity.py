"""Execution parity at Gemma 4 E2B's real widths (random weights, reduced depth), per GPU variant.

The tests check parity on a tiny random Gemma 4 (tests/parity/test_execution_parity.py); this script
checks the same at E2B's widths (hidden 1536, head_dim 256/512, 262,144-token vocabulary, per-layer
inputs, double-wide MLP), too slow for every test run. Each variant is exported with
``export_llm`` (verification on: it executes the program), run by our C++ runner on the
source-built runtime (``tools/build_binaries.py --platform linux``) over a sequence longer than
the sliding window in uneven chunks, and compared with the eager model (fp32; a low-precision
backend beside the eager model in its precision). Prints a table; asserts nothing.

    .venv/bin/python tools/benchmarks/e2b_parity.py [--layers 2] [--variants mlx:int4,vulkan:fp16]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.export_benchmark import FULL, SLIDING, gemma4_e2b_config  # noqa: E402
from rne_tools.runtime.quiet import configure_python_noise, filtered_native_stderr  # noqa: E402

configure_python_noise()  # before the imports below: torchao logs its noise on import

from rne_tools.checks import cpp_runtime  # noqa: E402
from rne_tools.checks.parity import compare, random_tokens  # noqa: E402
from rne_tools.errors import RneError  # noqa: E402
from rne_tools.export import export_llm  # noqa: E402

VARIANTS = {"mlx:int4": dict(embedding_quantization="4w"), "vulkan:fp16": {},
            "vulkan:8da4w": dict(embedding_quantization="4w")}
WINDOW = 16  # a short sliding window, so a short sequence crosses it twice
CHUNKS = [8, 3, 1, 7, 5, 8, 2] + [1] * 6  # 40 tokens, at most max_chunk (8) per call


@click.command()
@click.option("--layers", default=2, show_default=True,
              help="Decoder layers (the last one full attention, the rest sliding).")
@click.option("--variants", default=",".join(VARIANTS), show_default=True)
def main(layers: int, variants: str) -> None:
    config = gemma4_e2b_config(layers)
    config |= {"layer_types": [SLIDING] * (layers - 1) + [FULL], "sliding_window": WINDOW}
    print(f"Gemma 4 E2B widths, {layers} layers, sliding window {WINDOW}, "
          f"{sum(CHUNKS)} tokens in chunks {CHUNKS}")
    print(f"{'variant':<14}{'export s':>9}{'verify':>10}{'agree':>7}{'max|dlogit|':>12}"
          f"{'std':>7}{'low-prec eager':>15}{'greedy':>8}")
    for name in variants.split(","):
        backend, quantization = name.split(":")
        if not cpp_runtime.has_backend(backend):
            print(f"{name:<14} not run: the source-built runtime here has no {backend}")
            continue
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            try:
                result = export_llm("gemma4_e2b", backend, out, quantization,
                                    random_config=config, max_context=64, max_chunk=8,
                                    progress=False, **VARIANTS[name])
                seconds = time.perf_counter() - start  # export + its verification
                v = result.report["verification"]
                tokens = random_tokens(result.report["vocab_size"], sum(CHUNKS))
                p = compare(result.pte_path, result.plan, tokens, CHUNKS)
            except RneError as e:  # a row that fails says why; the rest run
                print(f"{name:<14}{time.perf_counter() - start:>9.0f}  failed: {e}", flush=True)
                continue
        drift = "-" if p.precision_drift is None else f"{p.precision_drift:.4f}"
        print(f"{name:<14}{seconds:>9.0f}{v['status']:>10}{v['matching_tokens']:>4}/"
              f"{v['generated_tokens']:<2}{p.diff.max():>12.4f}{p.eager.std():>7.3f}{drift:>15}"
              f"{p.agreement.sum():>5}/{len(CHUNKS)}", flush=True)


if __name__ == "__main__":
    with filtered_native_stderr():
        main()

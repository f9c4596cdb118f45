"""How long the export cache's keys take to compute (``rne_tools.export.cache``).

For each row it prints the recipe key's time (the code's syntax trees: what an unchanged tree
pays), and the program key's parts: loading the weights, the backend's transforms and
quantization, the eager vocabulary probe, tracing, and fingerprinting the traced graph with
every weight (what a changed tree pays before knowing whether to export), with the process's
peak resident memory. Asserts nothing.

Rows: ``smollm2`` (the registry's XNNPACK variant from the real checkpoint), ``e2b`` (Gemma 4
E2B's XNNPACK variant at full depth, random weights; ``--layers`` to shorten it).

    .venv/bin/python tools/benchmarks/export_key_benchmark.py [--rows smollm2,e2b] [--layers 35]
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.export_benchmark import gemma4_e2b_config  # noqa: E402
from rne_tools.runtime.quiet import configure_python_noise  # noqa: E402

configure_python_noise()


def _plan(row: str, layers: int):  # noqa: ANN202
    from rne_tools.export.plan import plan_export

    if row == "smollm2":
        return plan_export("smollm2_135m", "xnnpack")
    if row == "e2b":
        return plan_export("gemma4_e2b", "xnnpack", random_config=gemma4_e2b_config(layers))
    raise click.BadParameter(f"unknown row {row!r}; rows: smollm2, e2b")


@click.command()
@click.option("--rows", default="smollm2,e2b", show_default=True)
@click.option("--layers", default=35, show_default=True, help="E2B's depth for the e2b row.")
def main(rows: str, layers: int) -> None:
    from rne_tools.export import cache
    from rne_tools.export.pipeline import trace_export

    print("row | recipe s | load s | transform+quantize s | probe s | trace s | fingerprint s "
          "| program key | peak RSS GiB")
    for row in rows.split(","):
        plan = _plan(row, layers)
        start = time.perf_counter()
        cache.recipe_key(plan)
        recipe = time.perf_counter() - start
        traced = trace_export(plan, progress=True)
        start = time.perf_counter()
        key = cache.program_key(traced)
        fingerprint = time.perf_counter() - start
        t = traced.timings
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"{row} | {recipe:.2f} | {t['load']:.1f} | {t['transform+quantize']:.1f} | "
              f"{t['eager reference']:.1f} | {t['trace']:.1f} | {fingerprint:.1f} | {key} | "
              f"{peak:.1f}", flush=True)
        del traced


if __name__ == "__main__":
    main()

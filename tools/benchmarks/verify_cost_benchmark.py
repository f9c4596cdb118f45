"""What one speculative round costs on Gemma 4 E2B (XNNPACK 8da4w), and the decode speed that
follows (issue 59). Asserts nothing.

Exports the registry's XNNPACK variant of gemma4_e2b with a ``verify`` method of
``--verify-tokens`` at each of ``--layers`` depths (E2B's widths and its 262,144-token head,
random weights: the cost of a call does not depend on their values), and times, after a prompt
of ``--context`` tokens, one ``forward(T=1)`` and ``verify(T=k)`` for every k (``rne_bench
--verify-sweep``, calls interleaved). With two or more depths the cost is fitted as
``head + depth x layer`` per k and extrapolated to E2B's 35 layers (labelled as such: the last 20
of E2B's layers share KV caches and have a double-wide MLP, which the fit does not see when the
depths measured are 15 or fewer).

Then the projection: with a per-token acceptance ``a`` and ``d`` drafts a round yields
``(1 - a^(d+1)) / (1 - a)`` tokens for the price of ``verify(d + 1)``; the best ``d`` per ``a`` gives
the speed-up over plain decode. Our weights are random, so acceptance here is an input, not a
measurement (SmolLM2's measured acceptance is in speculative_benchmark.py).

    .venv/bin/python tools/benchmarks/verify_cost_benchmark.py [--layers 4,8] [--context 128]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.export_benchmark import gemma4_e2b_config  # noqa: E402
from benchmarks.runner_benchmark import ensure_rne_bench  # noqa: E402
from rne_tools.paths import REPO_ROOT  # noqa: E402
from rne_tools.runtime.quiet import configure_python_noise  # noqa: E402

configure_python_noise()

OUT_DIR = REPO_ROOT / "build" / "benchmarks" / "verify"
E2B_LAYERS = 35
ACCEPTANCE = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def export_e2b(layers: int, verify_tokens: int) -> Path:
    """gemma4_e2b's XNNPACK variant at ``layers`` layers with a verify method (random weights),
    exported once per recipe key; returns the .pte."""
    from rne_tools.export.cache import recipe_key
    from rne_tools.export.pipeline import run_export
    from rne_tools.export.plan import plan_export

    plan = plan_export("gemma4_e2b", "xnnpack", random_config=gemma4_e2b_config(layers),
                       verify_tokens=verify_tokens)
    out = OUT_DIR / f"l{layers}-{recipe_key(plan)}"
    pte = out / f"{plan.stem}.pte"
    if not pte.is_file():
        # Near-tied logits over 262,144 tokens: greedy agreement says nothing on random weights.
        run_export(plan, out, verify=False, progress=True)
    return pte


def sweep(bench: Path, pte: Path, context: int, iterations: int) -> dict[str, Any]:
    done = subprocess.run([bench, "--model", pte, "--verify-sweep", "1", "--prompt-tokens",
                           str(context), "--iterations", str(iterations)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise click.ClickException(f"rne_bench failed on {pte}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def tokens_per_round(acceptance: float, drafts: int) -> float:
    return sum(acceptance**i for i in range(drafts + 1))


@click.command()
@click.option("--layers", default="4,8", show_default=True, help="Depths to export and time.")
@click.option("--verify-tokens", default=8, show_default=True)
@click.option("--context", default=128, show_default=True, help="Tokens in the cache first.")
@click.option("--iterations", default=20, show_default=True)
def main(layers: str, verify_tokens: int, context: int, iterations: int) -> None:
    bench = ensure_rne_bench()
    depths = [int(x) for x in layers.split(",")]
    rows: dict[int, dict[str, Any]] = {}
    for depth in depths:
        rows[depth] = sweep(bench, export_e2b(depth, verify_tokens), context, iterations)
    print(f"ms per call after {context} tokens (median of {iterations}):")
    header = "depth | forward(1) | " + " | ".join(f"verify({k})" for k in
                                                   range(1, verify_tokens + 1))
    print(header)
    costs: dict[int | str, list[float]] = {}
    for depth in depths:
        r = rows[depth]
        costs[depth] = [r["forward_ms"], *r["verify_ms"]]
        print(f"{depth} | " + " | ".join(f"{ms:.1f}" for ms in costs[depth]))
    if len(depths) >= 2:
        lo, hi = min(depths), max(depths)
        full = []
        for a, b in zip(costs[lo], costs[hi], strict=True):
            per_layer = (b - a) / (hi - lo)
            full.append(a + per_layer * (E2B_LAYERS - lo))
        costs["35 (extrapolated)"] = full
        print("35 (extrapolated) | " + " | ".join(f"{ms:.1f}" for ms in full))
    for depth, c in costs.items():
        ratios = " | ".join(f"{ms / c[0]:.2f}" for ms in c[1:])
        print(f"verify(k) / forward(1) at depth {depth}: {ratios}")
    reference = costs.get("35 (extrapolated)", costs[max(depths)])
    print("\nprojected decode speed-up (best drafts per round) at acceptance a:")
    for a in ACCEPTANCE:
        best = max(
            ((tokens_per_round(a, d) * reference[0] / reference[d + 1], d)
             for d in range(1, verify_tokens)),
        )
        print(f"a={a:.1f}: {best[0]:.2f}x with {best[1]} drafts")


if __name__ == "__main__":
    main()

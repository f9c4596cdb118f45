"""What one speculative round costs on Gemma 4 E2B (XNNPACK 8da4w), and the decode speed that
follows (issue 59). Asserts nothing.

Exports the registry's XNNPACK variant of gemma4_e2b with a ``verify`` method of
``--verify-tokens`` at each of ``--layers`` depths (E2B's widths and its 262,144-token head,
random weights: the cost of a call does not depend on their values), and times, after a prompt
of ``--context`` tokens, one ``forward(T=1)`` and ``verify(T=k)`` for every k (``rne_bench
--verify-sweep``, calls interleaved). With two or more depths the cost is fitted (least
squares) as ``head + depth x layer`` per k and extrapolated to E2B's 35 layers (labelled as such:
the last 20 of E2B's layers share KV caches and have a double-wide MLP, which the fit does not
see when the depths measured are 15 or fewer).

Before/after a change to the runtime: ``--baseline-bench`` names a second ``rne_bench`` (a build
from before the change), timed in turn with ``--bench`` on every depth, ``--rounds`` times; each
cost is the best of the rounds. ``--pte DEPTH=FILE`` reuses an export made earlier (an older
recipe's, say) instead of exporting that depth. ``--assistant`` exports the programs with E2B's
assistant drafter (random weights of google/gemma-4-E2B-it-assistant's published shape,
``gemma4_assistant.E2B_CONFIG``), as the registry's assistant program is: ``forward`` and
``verify`` then also return hidden states; each program's size is printed.

Then the projection: with a per-token acceptance ``a`` and ``d`` drafts a round yields
``(1 - a^(d+1)) / (1 - a)`` tokens for the price of ``verify(d + 1)``; the best ``d`` per ``a`` gives
the speed-up over plain decode. Our weights are random, so acceptance here is an input, not a
measurement (SmolLM2's measured acceptance is in speculative_benchmark.py).

    .venv/bin/python tools/benchmarks/verify_cost_benchmark.py [--layers 4,8] [--context 128]
        [--bench build/x/host/rne_bench --baseline-bench OLD_RNE_BENCH --rounds 3]
        [--pte 8=build/benchmarks/verify/l8-.../gemma4_e2b_xnnpack_8da4w.pte]
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


def e2b_assistant() -> Path:
    """A checkpoint of E2B's published assistant shape with random weights, written once."""
    directory = OUT_DIR / "assistant-e2b"
    if not (directory / "model.safetensors").is_file():
        from rne_tools.models.gemma4_assistant import write_random_checkpoint

        write_random_checkpoint(directory, "e2b")
    return directory


def export_e2b(layers: int, verify_tokens: int, assistant: Path | None = None) -> Path:
    """gemma4_e2b's XNNPACK variant at ``layers`` layers with a verify method (and the draft
    method of ``assistant``, a checkpoint directory; random weights), exported once per recipe
    key; returns the .pte."""
    from rne_tools.export.cache import recipe_key
    from rne_tools.export.pipeline import run_export
    from rne_tools.export.plan import plan_export

    plan = plan_export("gemma4_e2b", "xnnpack", random_config=gemma4_e2b_config(layers),
                       verify_tokens=verify_tokens, assistant=assistant)
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


def fit(costs: dict[int, list[float]], depth: int) -> list[float]:
    """Per k, the least-squares line ``head + depth x layer`` through the measured depths,
    evaluated at ``depth``."""
    xs = list(costs)
    mean_x = sum(xs) / len(xs)
    spread = sum((x - mean_x) ** 2 for x in xs)
    out = []
    for column in zip(*costs.values(), strict=True):
        mean_y = sum(column) / len(column)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, column, strict=True)) / spread
        out.append(mean_y + slope * (depth - mean_x))
    return out


def report(title: str, costs: dict[int, list[float]], context: int, verify_tokens: int) -> None:
    print(f"\n{title}: ms per call after {context} tokens (median of the iterations, best round):")
    print("depth | forward(1) | " + " | ".join(f"verify({k})" for k in range(1, verify_tokens + 1)))
    table: dict[int | str, list[float]] = dict(costs)
    if len(costs) >= 2:
        table[f"{E2B_LAYERS} (projected: least-squares fit)"] = fit(costs, E2B_LAYERS)
    for depth, c in table.items():
        print(f"{depth} | " + " | ".join(f"{ms:.1f}" for ms in c))
    for depth, c in table.items():
        ratios = " | ".join(f"{ms / c[0]:.2f}" for ms in c[1:])
        print(f"verify(k) / forward(1) at depth {depth}: {ratios}")
    if len(costs) >= 2:
        full = table[f"{E2B_LAYERS} (projected: least-squares fit)"]
        per_layer = [(b - a) / (max(costs) - min(costs))
                     for a, b in zip(costs[min(costs)], costs[max(costs)], strict=True)]
        print(f"per layer (ms, {min(costs)} to {max(costs)} layers): "
              + " | ".join(f"{ms:.2f}" for ms in per_layer))
        reference = full
    else:
        reference = costs[max(costs)]
    print("projected decode speed-up (best drafts per round) at acceptance a:")
    for a in ACCEPTANCE:
        best = max(
            ((tokens_per_round(a, d) * reference[0] / reference[d + 1], d)
             for d in range(1, verify_tokens)),
        )
        print(f"a={a:.1f}: {best[0]:.2f}x with {best[1]} drafts")


@click.command()
@click.option("--layers", default="4,8", show_default=True, help="Depths to export and time.")
@click.option("--verify-tokens", default=8, show_default=True)
@click.option("--context", default=128, show_default=True, help="Tokens in the cache first.")
@click.option("--iterations", default=20, show_default=True)
@click.option("--bench", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The rne_bench to time (default: the host build's, built if missing).")
@click.option("--baseline-bench", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A second rne_bench, timed in turn with --bench.")
@click.option("--rounds", default=1, show_default=True, help="Best of this many sweeps.")
@click.option("--pte", "ptes", multiple=True, metavar="DEPTH=FILE",
              help="An existing export for a depth, instead of exporting it.")
@click.option("--assistant", is_flag=True,
              help="Export with E2B's assistant drafter (random weights of its published shape).")
def main(layers: str, verify_tokens: int, context: int, iterations: int, bench: Path | None,
         baseline_bench: Path | None, rounds: int, ptes: tuple[str, ...],
         assistant: bool) -> None:
    benches = {"this build": bench or ensure_rne_bench()}
    if baseline_bench is not None:
        benches = {"baseline": baseline_bench, **benches}
    depths = [int(x) for x in layers.split(",")]
    given: dict[int, Path] = {}
    for item in ptes:
        depth, sep, file = item.partition("=")
        if not sep or not depth.isdigit() or not Path(file).is_file():
            raise click.BadParameter(f"{item!r}: give DEPTH=FILE with an existing .pte",
                                     param_hint="--pte")
        given[int(depth)] = Path(file)
    drafter = e2b_assistant() if assistant else None
    files = {depth: given.get(depth) or export_e2b(depth, verify_tokens, drafter)
             for depth in depths}
    for depth, file in files.items():
        print(f"depth {depth}: {file.name} {file.stat().st_size / 1e6:.1f} MB")
    best: dict[str, dict[int, list[float]]] = {name: {} for name in benches}
    for _ in range(rounds):
        for depth in depths:
            for name, binary in benches.items():
                r = sweep(binary, files[depth], context, iterations)
                if len(r["verify_ms"]) < verify_tokens:
                    raise click.ClickException(
                        f"{files[depth]} verifies {len(r['verify_ms'])} tokens, fewer than "
                        f"--verify-tokens {verify_tokens}: pass a smaller --verify-tokens")
                row = [r["forward_ms"], *r["verify_ms"][:verify_tokens]]
                old = best[name].get(depth)
                best[name][depth] = row if old is None else [min(a, b) for a, b in
                                                             zip(old, row, strict=True)]
    for name, costs in best.items():
        report(name, costs, context, verify_tokens)


if __name__ == "__main__":
    main()

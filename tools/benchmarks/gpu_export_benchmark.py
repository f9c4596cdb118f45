"""Export numbers of the GPU variants (MLX int4, Vulkan fp16/8da4w) of Gemma 4 E2B.

Rows use E2B's real widths with random weights (the configs of ``export_benchmark.py``), at
reduced depth (``_l5``..``_l15``: time, RSS and size per layer) or at its full 35 layers
(``_l35``: the registry variants as the real checkpoint would give them; a quantized file's size
does not depend on the weights' values; XNNPACK's is ``export_benchmark.py``'s ``gemma4_l35``).
Each row runs in a fresh subprocess (peak RSS is the export's own).
Export cost only: the delegation share and the transform check (eager, custom ops through their
reference implementations) are printed; execution parity at these widths is
``e2b_parity.py``'s, decode speed ``backend_context_benchmark.py``'s (both on the source-built
runtime). Asserts nothing about speed.

    .venv/bin/python tools/benchmarks/gpu_export_benchmark.py [--rows mlx_l5,vulkan_l5,...]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.export_benchmark import gemma4_e2b_config  # noqa: E402

# name -> (backend, quantization, layers, max_chunk); chunks as in the model registry.
ROWS: dict[str, tuple[str, str, int, int]] = {
    **{f"mlx_l{n}": ("mlx", "int4", n, 256) for n in (5, 10, 15)},
    **{f"vulkan_l{n}": ("vulkan", "8da4w", n, 128) for n in (5, 10, 15)},
    "vulkan_fp16_l5": ("vulkan", "fp16", 5, 128),
    "mlx_l35": ("mlx", "int4", 35, 256),
    "vulkan_l35": ("vulkan", "8da4w", 35, 128),
}
# Random weights through all 35 layers are chaotic: float32 reordering alone moves the logits by
# their own size (the MLX transform check: 7.9 at 35 layers, 5e-3 at 10), so neither the transform
# check nor verification can tell a bug from noise there. Those rows record both, unenforced.
UNVERIFIED = {"mlx_l35", "vulkan_l35"}


def run_row(name: str, max_context: int) -> dict[str, Any]:
    from rne_tools.export import export_llm

    backend, quantization, layers, max_chunk = ROWS[name]
    with tempfile.TemporaryDirectory() as out:
        report = export_llm(
            "gemma4_e2b",
            backend,
            out,
            quantization,
            random_config=gemma4_e2b_config(layers),
            max_context=max_context,
            max_chunk=max_chunk,
            embedding_quantization="4w",
            verify=name not in UNVERIFIED,
            progress=False,
        ).report
    checks = report["backend_checks"]
    share = checks.get("compute_ops_delegated_share", report["delegation"]["delegated_share"])
    return {
        "row": name,
        "size_mb": report["size"] / 1e6,
        "export_s": report["export_seconds"],
        "lower_s": report["stage_seconds"]["trace"] + report["stage_seconds"]["lower"],
        "stage_s": report["stage_seconds"],
        "peak_rss_gb": report["peak_rss_bytes"] / 2**30,
        "delegated_share": share,
        "transform_diff": checks["transform_check"]["max_abs_logit_diff"],
        "verified": report["verification"]["status"].replace(" ", "_"),
    }


@click.command()
@click.option("--rows", default="mlx_l5,vulkan_l5", show_default=True, help=", ".join(ROWS))
@click.option("--max-context", type=int, default=1024, show_default=True)
@click.option("--one", default=None, hidden=True, help="Run a single row here, print JSON.")
def main(rows: str, max_context: int, one: str | None) -> None:
    """Print export time, peak RSS, file size and delegation per GPU row."""
    if one is not None:
        click.echo("RESULT " + json.dumps(run_row(one, max_context)))
        return
    names = [r.strip() for r in rows.split(",") if r.strip()]
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        raise click.BadParameter(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    results = []
    for name in names:
        start = time.perf_counter()
        cmd = [sys.executable, __file__, "--one", name, "--max-context", str(max_context)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            click.echo(
                f"{name}: failed after {time.perf_counter() - start:.0f} s\n{tail}", err=True
            )
            continue
        results.append(json.loads(line.removeprefix("RESULT ")))
        click.echo(f"{name}: done in {time.perf_counter() - start:.0f} s: {line}", err=True)
    click.echo(
        f"{'row':<16}{'size MB':>9}{'export s':>10}{'lower s':>9}{'peak RSS GB':>13}"
        f"{'delegated':>11}{'transform |dlogit|':>20}{'verified':>10}"
    )
    for r in results:
        click.echo(
            f"{r['row']:<16}{r['size_mb']:>9.1f}{r['export_s']:>10.1f}{r['lower_s']:>9.1f}"
            f"{r['peak_rss_gb']:>13.2f}{r['delegated_share']:>11.1%}{r['transform_diff']:>20.2e}"
            f"{r['verified']:>10}"
        )


if __name__ == "__main__":
    main()

"""Export and runtime numbers for SmolLM2 and Gemma 4 E2B at real widths.

For each row, in a fresh subprocess (so peak RSS is the export's own): export + verify into a
temporary directory, then time prefill and decode through the ExecuTorch Python runtime
(XNNPACK). Prints one table; asserts nothing about speed.

Gemma 4 E2B rows use E2B's real widths with random weights and its first N layers (up to 15 all
own a KV cache; E2B's last 20 layers share caches and have a double-wide MLP), so export time,
RSS and size per layer can be read off; ``gemma4_l35`` is the whole model (about 20 minutes and
14 GB here; not among the default rows).
Memory: the per-layer embedding table alone is 262144 x (N * 256) bf16 values (0.5 GiB per 4
layers).
These rows are not verified (random weights); SmolLM2 rows are (real weights).

    .venv/bin/python tools/benchmarks/export_benchmark.py [--rows smollm2_fp32,gemma4_l5,...]
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

# Run as a script from anywhere: make tools/ importable like the CLIs directly under it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SLIDING, FULL = "sliding_attention", "full_attention"
E2B_LAYERS, E2B_CACHE_LAYERS = 35, 15


def gemma4_e2b_config(n_layers: int) -> dict[str, Any]:
    """Gemma 4 E2B's text config (docs/design.md) truncated to its first ``n_layers``: up to
    15 they all own a KV cache; from the 16th on they share one (E2B's last 20 of 35)."""
    if not 1 <= n_layers <= E2B_LAYERS:
        raise click.BadParameter(f"E2B rows take 1..{E2B_LAYERS} layers")
    from rne_tools.models import gemma4

    pattern = [SLIDING] * 4 + [FULL]
    # E2B's widths; its special tokens, RoPE and norm are every Gemma 4 config's.
    return gemma4.text_config(
        # The published checkpoint's dtype: the per-layer table stays in it until quantized.
        dtype="bfloat16",
        hidden_size=1536,
        num_hidden_layers=n_layers,
        layer_types=[pattern[i % 5] for i in range(n_layers)],
        intermediate_size=6144,
        use_double_wide_mlp=True,
        num_kv_shared_layers=max(0, n_layers - E2B_CACHE_LAYERS),
        num_attention_heads=8,
        num_key_value_heads=1,
        head_dim=256,
        global_head_dim=512,
        hidden_size_per_layer_input=256,
        vocab_size=262144,
        vocab_size_per_layer_input=262144,
        sliding_window=512,
        final_logit_softcapping=30.0,
        max_position_embeddings=131072,
    )

# name -> export_llm keyword arguments
ROWS: dict[str, dict[str, Any]] = {
    "smollm2_fp32": {"model_id": "smollm2_135m", "quantization": "fp32"},
    "smollm2_8da4w": {"model_id": "smollm2_135m", "quantization": "8da4w"},
    **{
        f"gemma4_l{n}": {
            "model_id": "gemma4_e2b",
            "quantization": "8da4w",
            "embedding_quantization": "4w",
            "random_config": ("gemma4_e2b", n),
            "max_context": 1024,
            "max_chunk": 128,
            # Random weights: greedy verification is not meaningful at this scale (near-tied
            # logits over a 262k vocabulary); the report says "not run".
            "verify": False,
        }
        for n in (5, 10, 15, 35)
    },
}


def run_row(name: str, prompt_tokens: int, decode_tokens: int) -> dict[str, Any]:
    """Export + time one row in this process; returns the numbers."""
    import torch

    from rne_tools.checks.runner import PteRunner
    from rne_tools.export import export_llm

    spec = dict(ROWS[name])
    if isinstance(spec.get("random_config"), tuple):
        spec["random_config"] = gemma4_e2b_config(spec["random_config"][1])
    model_id = spec.pop("model_id")
    with tempfile.TemporaryDirectory() as out:
        result = export_llm(model_id, "xnnpack", out, progress=False, **spec)
        report = result.report
        runner = PteRunner(result.pte_path)
        g = torch.Generator().manual_seed(0)
        prompt = torch.randint(3, runner.info.vocab_size, (prompt_tokens,), generator=g).tolist()
        runner.generate(prompt[: runner.info.max_chunk], 2, stop_at_eos=False)  # warm-up
        gen = runner.generate(prompt, decode_tokens + 1, stop_at_eos=False)
    return {
        "row": name,
        "size_mb": report["size"] / 1e6,
        "export_s": report["export_seconds"],
        "peak_rss_gb": report["peak_rss_bytes"] / 2**30,
        "delegated_share": report["delegation"]["delegated_share"],
        "verified": report["verification"]["status"].replace(" ", "_"),
        "prefill_tok_s": gen.prefill_tok_s,
        "decode_tok_s": gen.decode_tok_s,
        "max_chunk": report["max_chunk"],
    }


@click.command()
@click.option(
    "--rows",
    default=",".join(r for r in ROWS if r != "gemma4_l35"),
    show_default=True,
    help="Comma-separated rows: " + ", ".join(ROWS),
)
@click.option("--prompt-tokens", type=int, default=128, show_default=True)
@click.option("--decode-tokens", type=int, default=32, show_default=True)
@click.option("--one", default=None, hidden=True, help="Run a single row here, print JSON.")
def main(rows: str, prompt_tokens: int, decode_tokens: int, one: str | None) -> None:
    """Print export time, peak RSS, file size and runtime tok/s per row."""
    if one is not None:
        click.echo("RESULT " + json.dumps(run_row(one, prompt_tokens, decode_tokens)))
        return
    names = [r.strip() for r in rows.split(",") if r.strip()]
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        raise click.BadParameter(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    header = (
        f"{'row':<15}{'size MB':>9}{'export s':>10}{'peak RSS GB':>13}{'delegated':>11}"
        f"{'verified':>10}{'prefill tok/s':>15}{'decode tok/s':>14}"
    )
    results = []
    for name in names:
        start = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                name,
                "--prompt-tokens",
                str(prompt_tokens),
                "--decode-tokens",
                str(decode_tokens),
            ],
            capture_output=True,
            text=True,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            click.echo(
                f"{name}: failed after {time.perf_counter() - start:.0f} s\n{tail}", err=True
            )
            continue
        results.append(json.loads(line.removeprefix("RESULT ")))
        click.echo(f"{name}: done in {time.perf_counter() - start:.0f} s: {line}", err=True)
    click.echo(header)
    for r in results:
        click.echo(
            f"{r['row']:<15}{r['size_mb']:>9.1f}{r['export_s']:>10.1f}"
            f"{r['peak_rss_gb']:>13.2f}{r['delegated_share']:>11.0%}{r['verified']:>10}"
            f"{r['prefill_tok_s']:>15.1f}{r['decode_tok_s']:>14.1f}"
        )


if __name__ == "__main__":
    main()

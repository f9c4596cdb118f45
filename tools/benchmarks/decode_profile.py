"""Where a decode step of Gemma 4 E2B (XNNPACK 8da4w) spends its time, sampled with Linux
``perf`` (issue 59: what bounds plain decode). Asserts nothing.

Exports the registry's XNNPACK variant at ``--layers`` layers (E2B's widths and its 262,144-row
tied head, random weights: a step's cost does not depend on their values; the export is shared
with ``verify_cost_benchmark.py``), runs ``rne_bench`` under ``perf record`` with a short prompt
and a long decode so that decoding dominates the samples, and prints each part's share of the
sampled CPU time: our tied-head kernel, the XNNPACK delegate (the linears; its library is
stripped, so it is one row), our attention kernel, the sampler, memory copies, the thread pool,
the kernel. With the bytes each part reads per token (the delegate's segment for the linears;
the 4-bit tied table and its scales for the head) it prints the bandwidth each part reached,
taking a part's share of the samples as its share of the step (both threads work in every part),
to compare with what one core streams (``--stream``: numpy sum over 1 GiB, best of 5).

    .venv/bin/python tools/benchmarks/decode_profile.py [--layers 8 | --pte FILE] [--new-tokens 480]
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.runner_benchmark import ensure_rne_bench  # noqa: E402
from benchmarks.verify_cost_benchmark import export_e2b  # noqa: E402
from rne_tools.runtime.quiet import configure_python_noise  # noqa: E402

configure_python_noise()

VOCAB, HIDDEN = 262_144, 1_536  # E2B's head: the tied embedding table, vocab x hidden


def head_bytes(pte: Path) -> int:
    """Bytes of the tied table the head reads a token: 4-bit values and one fp32 scale per
    group (the export report's ``embedding_group_size``)."""
    report = json.loads(next(pte.parent.glob("*.report.json")).read_text())
    if report["embedding_quantization"] != "4w":
        raise click.ClickException(f"{pte}: expected 4-bit tables, the report says "
                                   f"{report['embedding_quantization']!r}")
    return VOCAB * HIDDEN // 2 + VOCAB * HIDDEN // report["embedding_group_size"] * 4

# (row, how a `perf report --sort dso,symbol` line is recognised), first match wins.
PARTS = (
    ("tied head (ours)", re.compile(r"rne::tied_head")),
    ("attention (ours)", re.compile(r"rne::attention_span")),
    ("sampler (ours)", re.compile(r"rne::runner::Sampler")),
    ("XNNPACK delegate (linears)", re.compile(r"libexecutorch_backend_xnnpack")),
    ("memory copies", re.compile(r"__mem(move|cpy|set)")),
    ("thread pool", re.compile(r"libexecutorch_threadpool")),
    ("Linux kernel", re.compile(r"\[kernel")),
)


def profile(bench: Path, pte: Path, prompt: int, new: int, frequency: int) -> tuple[dict, dict]:
    """(rne_bench's JSON, share of samples per part) of one decode run under perf."""
    if shutil.which("perf") is None:
        raise click.ClickException("needs Linux perf (`apt-get install -y linux-perf`)")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        done = subprocess.run(
            ["perf", "record", "-q", "-F", str(frequency), "-o", data, "--", bench, "--model", pte,
             "--prompt-tokens", str(prompt), "--new-tokens", str(new), "--repeat", "1",
             "--bare", "0"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise click.ClickException(f"perf/rne_bench failed: {done.stderr.strip()[-2000:]}")
        stats = json.loads(done.stdout.strip().splitlines()[-1])
        report = subprocess.run(
            ["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "--stdio",
             "-g", "none"], capture_output=True, text=True, check=True).stdout
    shares: dict[str, float] = {name: 0.0 for name, _ in PARTS}
    shares["other"] = 0.0
    for line in report.splitlines():
        match = re.match(r"\s*([\d.]+)%\s+(.*)", line)
        if not match:
            continue
        share, rest = float(match[1]), match[2]
        name = next((n for n, pattern in PARTS if pattern.search(rest)), "other")
        shares[name] += share
    return stats, shares


def stream_gb_s() -> float:
    """GB/s one thread reads 1 GiB at (numpy sum, best of 5)."""
    import numpy as np

    data = np.ones(1 << 28, dtype=np.float32)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - start)
    return data.nbytes / best / 1e9


@click.command()
@click.option("--layers", default=8, show_default=True, help="E2B layers to export (35: all).")
@click.option("--pte", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Profile this E2B-width export of --layers layers (its report beside it) "
              "instead of exporting one.")
@click.option("--prompt-tokens", default=16, show_default=True)
@click.option("--new-tokens", default=480, show_default=True)
@click.option("--frequency", default=299, show_default=True, help="perf samples per second.")
@click.option("--stream/--no-stream", default=True, show_default=True)
def main(layers: int, pte: Path | None, prompt_tokens: int, new_tokens: int, frequency: int,
         stream: bool) -> None:
    from rne_tools.pte_parts import pte_parts

    bench = ensure_rne_bench()
    if pte is None:
        pte = export_e2b(layers, verify_tokens=8)
    stats, shares = profile(bench, pte, prompt_tokens, new_tokens, frequency)
    decode = stats["runner"]["decode_tok_s"]
    step_s = 1 / decode
    linears = pte_parts(pte).delegate
    read = {"tied head (ours)": head_bytes(pte), "XNNPACK delegate (linears)": linears}
    print(f"E2B widths, {layers} layers, XNNPACK 8da4w: decode {decode:.2f} tok/s "
          f"({step_s * 1e3:.1f} ms a token) after {prompt_tokens} prompt tokens, "
          f"{new_tokens} decoded; prefill is in the samples too")
    print("part | share of samples | bytes read a token | GB/s reached")
    for name, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        if name in read:
            rate = read[name] / (share / 100 * step_s) / 1e9 if share else 0.0
            print(f"{name} | {share:.1f}% | {read[name] / 1e6:.0f} MB | {rate:.1f}")
        else:
            print(f"{name} | {share:.1f}% | - | -")
    if stream:
        print(f"one thread streams {stream_gb_s():.1f} GB/s (numpy sum of 1 GiB, best of 5)")


if __name__ == "__main__":
    main()

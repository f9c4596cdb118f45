"""File size and resident memory of Gemma 4 E2B's registry variants, at full depth.

Each variant is exported as the registry declares it (quantization, embedding quantization,
``max_context``, ``max_chunk``) from E2B's config with random weights: a quantized file's size
does not depend on the weights' values, and neither does the memory the runner holds. Exports
are kept under ``build/benchmarks/e2b/<cache key>/`` and reused while the export code and
options are unchanged (about 20 minutes and 14 GB of memory for a 35-layer export here).

For each file it prints what its bytes are (the constant segment: tables the CPU ops index by
token; delegate data: the weights a backend packs or uploads; the rest), then runs our runner
(``rne_bench --memory 1``) in a fresh process with the file evicted from the page cache first:
resident memory at its peak during the load, a prefill of ``--prefill`` tokens, and decode after
``--context`` tokens, split into the process's own memory and mapped pages of the model file,
and prefill/decode tok/s. XNNPACK runs on the host build (``build/host``); Vulkan on lavapipe
and MLX on its CPU backend (source build, ``build/linux``) are only loaded unless ``--phases``
asks for more: E2B's prefill there takes hours. Asserts nothing.

    .venv/bin/python tools/benchmarks/e2b_memory_benchmark.py [--variants xnnpack,vulkan,mlx]
        [--layers 35] [--embedding-quantization xnnpack=8w] [--phases load,prefill,decode]
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
from rne_tools.pte_parts import evict_from_page_cache, pte_parts, vulkan_constants  # noqa: E402
from rne_tools.runtime.quiet import configure_python_noise  # noqa: E402

configure_python_noise()

OUT_DIR = REPO_ROOT / "build" / "benchmarks" / "e2b"
SOURCE_RNE_BENCH = REPO_ROOT / "build" / "linux" / "host" / "rne_bench"
MB = 1e6


def export_variant(backend: str, layers: int, embedding_quantization: str | None,
                   group_size: int | None = None) -> Path:
    """The registry's ``backend`` variant of gemma4_e2b at ``layers`` layers (random weights),
    with its embedding quantization or linears' group overridden where given, exported once per
    cache key; returns the .pte path."""
    from rne_tools.export.cache import recipe_key
    from rne_tools.export.pipeline import run_export
    from rne_tools.export.plan import plan_export

    request: dict[str, Any] = {"random_config": gemma4_e2b_config(layers)}
    if embedding_quantization is not None:
        request["embedding_quantization"] = embedding_quantization
    if group_size is not None:
        request["group_size"] = group_size
    plan = plan_export("gemma4_e2b", backend, **request)
    out = OUT_DIR / f"l{layers}-{recipe_key(plan)}"
    pte = out / f"{plan.stem}.pte"
    if not pte.is_file():
        # Random weights through 35 layers give near-tied logits over 262,144 tokens: greedy
        # verification against eager says nothing there (export_benchmark.py's rows).
        run_export(plan, out, verify=False, progress=True)
    return pte


def run_phases(bench: Path, pte: Path, phases: set[str], prefill: int, context: int,
               new_tokens: int) -> dict[str, Any]:
    """rne_bench --memory runs: prefill of ``prefill`` tokens (load and prefill peaks), and
    decode of ``new_tokens`` after ``context`` tokens (decode peak and speed)."""

    def memory_run(prompt: int, new: int) -> dict[str, Any]:
        evict_from_page_cache(pte)
        done = subprocess.run(
            [bench, "--model", pte, "--memory", "1", "--prompt-tokens", str(prompt),
             "--new-tokens", str(new)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise click.ClickException(f"rne_bench failed on {pte}: {done.stderr.strip()[-2000:]}")
        return json.loads(done.stdout)

    result: dict[str, Any] = {}
    if phases & {"load", "prefill"}:
        run = memory_run(prefill if "prefill" in phases else 1, 1)
        result["load"] = run["resident"]["load"]
        result["load_s"] = run["load_s"]
        if "prefill" in phases:
            result["prefill"] = run["resident"]["prefill"]
            result["prefill_tok_s"] = run["prefill_tok_s"]
    if "decode" in phases:
        run = memory_run(context, new_tokens)
        result["decode"] = run["resident"]["decode"]
        result["decode_tok_s"] = run["decode_tok_s"]
        result["load"] = result.get("load", run["resident"]["load"])
    return result


@click.command()
@click.option("--variants", default="xnnpack,vulkan,mlx", show_default=True,
              help="Registry variants of gemma4_e2b, by backend.")
@click.option("--layers", default=35, show_default=True, help="Decoder layers (E2B has 35).")
@click.option("--embedding-quantization", "embedding", multiple=True, metavar="BACKEND=Q",
              help="Override the variant's embedding quantization (8w, 4w, none), e.g. xnnpack=8w.")
@click.option("--group-size", "groups", multiple=True, metavar="BACKEND=N",
              help="Override the group of the variant's 4-bit linears, e.g. vulkan=128.")
@click.option("--phases", default=None,
              help="Comma-separated of load,prefill,decode (default: all three for xnnpack, load "
                   "for the emulated GPU backends).")
@click.option("--prefill", default=512, show_default=True, help="Prompt tokens of the prefill run.")
@click.option("--context", default=4000, show_default=True,
              help="Tokens in the cache before the decode run's measured steps.")
@click.option("--new-tokens", default=32, show_default=True)
def main(variants: str, layers: int, embedding: tuple[str, ...], groups: tuple[str, ...],
         phases: str | None, prefill: int, context: int, new_tokens: int) -> None:
    """Print size, resident memory and speed per E2B variant."""
    overrides = dict(item.split("=", 1) for item in embedding)
    group_sizes = {backend: int(n) for backend, n in (item.split("=", 1) for item in groups)}
    rows = []
    for backend in variants.split(","):
        pte = export_variant(backend, layers, overrides.get(backend), group_sizes.get(backend))
        parts = pte_parts(pte)
        wanted = set((phases or ("load,prefill,decode" if backend == "xnnpack" else "load"))
                     .split(","))
        bench = ensure_rne_bench() if backend == "xnnpack" else SOURCE_RNE_BENCH
        if not bench.is_file():
            print(f"{backend}: sizes only: {bench} is missing (tools/build_binaries.py "
                  "--platform linux)")
            rows.append((pte, parts, {}))
            continue
        rows.append((pte, parts,
                     run_phases(bench, pte, wanted, prefill, context, new_tokens)))

    print(f"\nGemma 4 E2B widths, {layers} layers, random weights; files in MB (10^6 bytes), "
          "resident memory in MiB: peak (own + mapped file)")
    print(f"{'variant':<28}{'file':>8}{'constant':>10}{'delegate':>10}{'other':>7}"
          f"{'load':>22}{'prefill ' + str(prefill):>22}{'decode @' + str(context):>22}"
          f"{'prefill tok/s':>14}{'decode tok/s':>13}")
    for pte, parts, run in rows:
        print(f"{pte.stem:<28}{parts.total / MB:>8.0f}{parts.constant / MB:>10.0f}"
              f"{parts.delegate / MB:>10.0f}{parts.other / MB:>7.0f}"
              f"{_resident(run, 'load'):>22}{_resident(run, 'prefill'):>22}"
              f"{_resident(run, 'decode'):>22}{_rate(run, 'prefill_tok_s'):>14}"
              f"{_rate(run, 'decode_tok_s'):>13}")
    for pte, _, _ in rows:
        if "vulkan" in pte.stem:
            print(f"\n{pte.stem}: what its delegate uploads, MB")
            for kind, size in vulkan_upload(pte).items():
                print(f"  {kind:<44}{size / MB:>8.0f}")


def vulkan_upload(pte: Path) -> dict[str, int]:
    """Bytes of the Vulkan delegate's constants by kind, each distinct tensor once. The kinds
    follow from dtype and rank in these exports: packed 4-bit weights are bytes, the weight sums
    the integer kernel corrects the activations' zero point with are int32, caches are 4-D."""
    kinds = {"packed 4-bit weights": 0, "int32 weight sums": 0, "KV caches (zeros)": 0,
             "scales, norms and other": 0}
    for c in {c.key: c for c in vulkan_constants(pte)}.values():
        kind = ("packed 4-bit weights" if c.dtype in ("UINT8", "INT8")
                else "int32 weight sums" if c.dtype == "INT32"
                else "KV caches (zeros)" if len(c.dims) == 4
                else "scales, norms and other")
        kinds[kind] += c.length
    return kinds


def _resident(run: dict[str, Any], phase: str) -> str:
    r = run.get(phase)
    return f"{r['peak_mb']:.0f} ({r['anon_mb']:.0f}+{r['file_mb']:.0f})" if r else "-"


def _rate(run: dict[str, Any], key: str) -> str:
    return f"{run[key]:.1f}" if key in run else "-"


if __name__ == "__main__":
    main()

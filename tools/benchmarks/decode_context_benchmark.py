"""Our runner vs ExecuTorch's runner vs llama.cpp on the same model, by context length (issue 16).

Prints numbers and ratios; asserts nothing. From ONE interleaved run (every round runs each
engine at each context length, so all of them see the same machine load; the best round counts,
since load only slows a run down):

- ours: rne_bench's TextGenerator numbers (cpp/host/rne_bench.cpp) on the SmolLM2 xnnpack export
  (default 8da4w, cached by ``cached_export``), on the pip wheel's runtime (``build/host``, with
  the host's own SDPA kernel, ``llm_custom_ops.cpp``);
- ours (source): the same runner on ExecuTorch built from source with its own LLM kernels
  (``build/linux``, made by ``build_binaries.py --platform linux``), when that build exists;
- ExecuTorch's runner: its Python ``TextLLMRunner`` on the same .pte and tokenizer;
- llama.cpp: llama-cpp-python on the real SmolLM2 Q4_1 GGUF the repo imports its checkpoint
  from, when ``--llamacpp-python`` points at a Python that has it (a throwaway venv outside the
  repo: ``python3.11 -m venv /tmp/llamacpp-venv && /tmp/llamacpp-venv/bin/pip install
  llama-cpp-python==0.3.36``), with the same thread count.

Prefill is tok/s over a ``--prefill-tokens`` prompt; decode is tok/s over ``--new-tokens`` greedy
steps after a prompt of each ``--contexts`` length. Targets (issue 16): decode >= 1.5x llama.cpp
at 512 and 2,000, prefill >= 2x, decode at 2,000 costs <= 1.3x decode at 128, ours >= ExecuTorch's
runner everywhere. Writes a PNG of decode tok/s against context (``--plot``).

    .venv/bin/python tools/benchmarks/decode_context_benchmark.py \
        [--llamacpp-python /tmp/llamacpp-venv/bin/python] [--rounds 3] [--plot decode.png]
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from runner_benchmark import (  # noqa: E402
    ExecuTorchTextRunner,
    default_model,
    ensure_rne_bench,
    prompt_with_tokens,
    run_json,
)

from rne_tools.runtime.quiet import configure_python_noise, filtered_native_stderr  # noqa: E402

configure_python_noise()  # before the imports below: torchao logs its noise on import

from rne_tools.paths import REPO_ROOT  # noqa: E402

LLAMACPP_BENCH = Path(__file__).resolve().parent / "llamacpp_bench.py"
# Our core built against the source-built ExecuTorch (tools/build_binaries.py --platform linux).
SOURCE_RNE_BENCH = REPO_ROOT / "build" / "linux" / "host" / "rne_bench"


def synthetic_prompt_ids(n: int, vocab: int) -> list[int]:
    """The prompt rne_bench feeds itself (rne_bench.cpp), so llama.cpp sees the same ids."""
    return [(i * 7919 + 13) % vocab for i in range(n)]


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """ExecuTorch's C++ runner logs its stats at info level on fd 2 every run; its failures
    still raise."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class Engines:
    """One measured (prefill tok/s, decode tok/s) per engine and prompt length."""

    def __init__(self, pte: Path, tokenizer: Path, gguf: Path, llamacpp_python: Path | None,
                 new_tokens: int, threads: int) -> None:
        self._pte, self._gguf = pte, gguf
        self._tokenizer = tokenizer
        self._llamacpp_python = llamacpp_python
        self._new_tokens, self._threads = new_tokens, threads
        # Our runner per runtime it is built against: the wheel's, and the source build's if made.
        self.ours = {"ours": ensure_rne_bench()}
        if SOURCE_RNE_BENCH.is_file():
            self.ours["ours (source)"] = SOURCE_RNE_BENCH
        self._et_runners: dict[int, ExecuTorchTextRunner] = {}
        self.vocab = run_json(self.ours["ours"], "--model", pte, "--prompt-tokens", 8,
                              "--new-tokens", 2, "--repeat", 1, "--bare", 0)["vocab_size"]

    def available(self) -> tuple[str, ...]:
        others = ("executorch", "llama.cpp") if self._llamacpp_python else ("executorch",)
        return (*self.ours, *others)

    def run(self, engine: str, prompt_tokens: int) -> dict:
        if engine in self.ours:
            r = run_json(self.ours[engine], "--model", self._pte, "--prompt-tokens",
                         prompt_tokens, "--new-tokens", self._new_tokens, "--repeat", 1,
                         "--bare", 0)["runner"]
            return {"prefill_tok_s": r["prefill_tok_s"], "decode_tok_s": r["decode_tok_s"]}
        if engine == "executorch":
            with native_stderr_silenced():
                runner = self._et_runners.get(prompt_tokens)
                if runner is None:
                    runner = ExecuTorchTextRunner(
                        self._pte, self._tokenizer,
                        prompt_with_tokens(self._tokenizer, prompt_tokens), self._new_tokens)
                    self._et_runners[prompt_tokens] = runner
                r = runner.run()
            return {"prefill_tok_s": r["prefill_token_per_sec"],
                    "decode_tok_s": r["decode_token_per_sec"]}
        ids = ",".join(map(str, synthetic_prompt_ids(prompt_tokens, self.vocab)))
        return run_json(self._llamacpp_python, LLAMACPP_BENCH, "--gguf", self._gguf,
                        "--prompt-ids", ids, "--new-tokens", self._new_tokens,
                        "--threads", self._threads, "--repeat", 1)


def interleaved_best(engines: Engines, lengths: list[int], rounds: int) -> dict:
    """best[engine][length] = {prefill_tok_s, decode_tok_s}, max over rounds."""
    best: dict = {e: {n: {"prefill_tok_s": 0.0, "decode_tok_s": 0.0} for n in lengths}
                  for e in engines.available()}
    for round_index in range(rounds):
        for n in lengths:
            for engine in engines.available():
                r = engines.run(engine, n)
                cell = best[engine][n]
                for key in cell:
                    cell[key] = max(cell[key], r[key])
                click.echo(f"round {round_index + 1}/{rounds} {engine:10} prompt {n:5}: prefill "
                           f"{r['prefill_tok_s']:7.1f} decode {r['decode_tok_s']:6.1f} tok/s",
                           err=True)
    return best


def plot(best: dict, contexts: list[int], path: Path, title: str, log_y: bool = False) -> None:
    """Decode tok/s against context, one line per engine (``best[engine][context]``); ``log_y``
    for engines whose speeds differ by orders of magnitude."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for engine, rows in best.items():
        ax.plot(contexts, [rows[n]["decode_tok_s"] for n in contexts], marker="o", label=engine)
    ax.set_xlabel("context (tokens before decoding)")
    ax.set_ylabel("decode tok/s")
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


@click.command()
@click.option("--quantization", default="8da4w", show_default=True,
              help="Which SmolLM2 xnnpack export (cached) to run.")
@click.option("--llamacpp-python", type=click.Path(exists=True, path_type=Path), default=None,
              help="A Python with llama-cpp-python (0.3.36) installed; omit to skip llama.cpp.")
@click.option("--contexts", default="128,512,2000", show_default=True,
              help="Prompt lengths decode is measured after.")
@click.option("--prefill-tokens", default=512, show_default=True)
@click.option("--new-tokens", default=32, show_default=True)
@click.option("--rounds", default=3, show_default=True)
@click.option("--threads", default=2, show_default=True, help="llama.cpp threads.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path),
              default=REPO_ROOT / "build" / "benchmarks" / "decode_vs_context.png",
              show_default="build/benchmarks/decode_vs_context.png")
@click.option("--json", "as_json", is_flag=True, help="Also print the numbers as JSON.")
def main(quantization: str, llamacpp_python: Path | None, contexts: str, prefill_tokens: int,
         new_tokens: int, rounds: int, threads: int, plot_path: Path, as_json: bool) -> None:
    from rne_tools.gguf_import import packaged_gguf_path
    from rne_tools.registry import load_registry

    gguf = packaged_gguf_path(load_registry().model("smollm2_135m").source)
    context_list = [int(c) for c in contexts.split(",")]
    lengths = sorted(set(context_list) | {prefill_tokens})
    pte, tokenizer = default_model(quantization)
    engines = Engines(pte, tokenizer, gguf, llamacpp_python, new_tokens, threads)
    if llamacpp_python is None:
        click.echo("llama.cpp skipped (no --llamacpp-python)", err=True)
    if "ours (source)" not in engines.ours:
        click.echo(f"ours (source) skipped ({SOURCE_RNE_BENCH} not built: "
                   "tools/build_binaries.py --platform linux)", err=True)
    best = interleaved_best(engines, lengths, rounds)

    click.echo(f"model {pte.name} vs {gguf.name} | {new_tokens} new tokens | "
               f"best of {rounds} interleaved rounds")
    header = f"{'engine':14}{f'prefill@{prefill_tokens}':>14}" + "".join(
        f"{f'decode@{n}':>13}" for n in context_list) + f"{'cost@max/min':>14}"
    click.echo(header)
    for engine, rows in best.items():
        decode = [rows[n]["decode_tok_s"] for n in context_list]
        # Decode cost per token at the longest context over the shortest (target <= 1.3).
        growth = ratio(decode[0], decode[-1])
        click.echo(f"{engine:14}{rows[prefill_tokens]['prefill_tok_s']:>14.1f}" +
                   "".join(f"{d:>13.1f}" for d in decode) + f"{growth:>14.2f}")
    for other, targets in (("llama.cpp", "prefill >= 2x, decode >= 1.5x"),
                           ("executorch", ">= 1x everywhere")):
        if other not in best:
            continue
        for name in engines.ours:
            ours, theirs = best[name], best[other]
            prefill = ratio(ours[prefill_tokens]["prefill_tok_s"],
                            theirs[prefill_tokens]["prefill_tok_s"])
            cells = [f"prefill {prefill:.2f}x"] + [
                f"decode@{n} {ratio(ours[n]['decode_tok_s'], theirs[n]['decode_tok_s']):.2f}x"
                for n in context_list]
            click.echo(f"{name} / {other}: " + ", ".join(cells) + f"  (target {targets})")
    plot_path.parent.mkdir(parents=True, exist_ok=True)
    plot(best, context_list, plot_path, f"SmolLM2-135M decode ({quantization} / Q4_1)")
    click.echo(f"plot: {plot_path}")
    if as_json:
        click.echo(json.dumps({"model": str(pte), "best": best}, indent=2))


if __name__ == "__main__":
    with filtered_native_stderr():
        main()

"""Speculative decoding by prompt lookup on SmolLM2-135M-Instruct, ours against llama.cpp's
(issue 59, item 6). Prints numbers; asserts nothing.

The prompts (``data/speculative_prompts.json``) are copy-heavy requests whose answers repeat
their input (a summary of a given text, field extraction into JSON, a code edit, a question about
a pasted document), where prompt lookup finds drafts, and open chat, where it finds few; and a
held-out set of both, written after prompt lookup's round policy was fitted to the others, whose
speed-ups are reported apart (``--no-held-out`` leaves them out). Each is
one user message under the model's chat template (transformers' ``apply_chat_template``, which
rne_llm's C++ template engine reproduces id for id), answered greedily until the end of the turn
or ``--max-new-tokens``. Decode tok/s counts the tokens after the first (the first comes from
the prefill), the same way for both engines.

- llama.cpp: llama-cpp-python on the Q4_1 GGUF the repo imports SmolLM2 from, plain and with
  ``LlamaPromptLookupDecoding`` at its default draft length (``num_pred_tokens`` 10, n-grams up
  to 2) and at each ``--sweep`` length, through ``llamacpp_speculative.py`` under
  ``--llamacpp-python`` (the throwaway venv of ``llamacpp_bench.py``:
  ``python3.11 -m venv /tmp/llamacpp-venv && /tmp/llamacpp-venv/bin/pip install numpy==2.4.6
  llama-cpp-python==0.3.36``), ``--threads`` threads.
- ours: ``rne_llm --json`` on the 8da4w XNNPACK export with a ``verify`` method
  (``--verify-tokens``), plain and with ``--speculative prompt-lookup`` (``--ours``; see
  ``run_ours``). XNNPACK's thread pool takes every core. ``--reference-rne-llm`` adds the default
  prompt lookup of another build (a drafter change's baseline), interleaved the same way.

Runs are interleaved: each round runs every engine and mode on a prompt before the next prompt,
so all of them see the same machine load; the best round counts, since load only slows a run
down. Greedy speculative decoding must give the plain run's tokens; a run that does not is
reported, not hidden.

    .venv/bin/python tools/benchmarks/speculative_benchmark.py \\
        --llamacpp-python /tmp/llamacpp-venv/bin/python [--ours] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

# Run as a script from anywhere: make tools/ importable like the CLIs directly under it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rne_tools.paths import REPO_ROOT  # noqa: E402

HERE = Path(__file__).resolve().parent
PROMPTS = HERE / "data" / "speculative_prompts.json"
LLAMACPP_WORKER = HERE / "llamacpp_speculative.py"
RNE_LLM = REPO_ROOT / "build" / "host" / "host" / "rne_llm"
# LlamaPromptLookupDecoding's own default draft length.
LLAMACPP_DEFAULT_DRAFT = 10


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str
    group: str  # "copy-heavy" or "open chat"
    text: str


GROUPS = {"copy_heavy": "copy-heavy", "open_chat": "open chat",
          "copy_heavy_held_out": "copy-heavy, held out", "open_chat_held_out": "open chat, held out"}


def load_prompts(held_out: bool) -> list[Prompt]:
    data = json.loads(PROMPTS.read_text())
    return [Prompt(p["id"], p["kind"], group, p["prompt"])
            for key, group in GROUPS.items() if held_out or not key.endswith("_held_out")
            for p in data[key]]


@dataclass
class Best:
    """The best round of one (engine, mode, prompt): its decode rate and what it generated."""

    decode_tok_s: float = 0.0
    tokens: list[int] = field(default_factory=list)
    acceptance_rate: float | None = None  # ours only: llama-cpp-python does not report it
    tokens_per_forward: float | None = None

    def update(self, run: dict) -> None:
        if run["decode_tok_s"] > self.decode_tok_s:
            self.decode_tok_s = run["decode_tok_s"]
            self.acceptance_rate = run.get("acceptance_rate")
            self.tokens_per_forward = run.get("tokens_per_forward")
        self.tokens = run["tokens"]


class LlamaCpp:
    """llamacpp_speculative.py, started once, answering one generation per request."""

    def __init__(self, python: Path, gguf: Path, threads: int) -> None:
        self._worker = subprocess.Popen(
            [str(python), str(LLAMACPP_WORKER), "--gguf", str(gguf), "--threads", str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self._read()
        self.version = ready["llama_cpp_version"]

    def _read(self) -> dict:
        line = self._worker.stdout.readline() if self._worker.stdout else ""
        if not line:
            raise click.ClickException(
                f"llamacpp_speculative.py exited with {self._worker.wait()} (its stderr above)")
        return json.loads(line)

    def run(self, prompt_ids: list[int], max_new_tokens: int, num_pred_tokens: int | None) -> dict:
        assert self._worker.stdin is not None
        self._worker.stdin.write(json.dumps({"prompt_ids": prompt_ids,
                                             "max_new_tokens": max_new_tokens,
                                             "num_pred_tokens": num_pred_tokens}) + "\n")
        self._worker.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self._worker.stdin:
            self._worker.stdin.close()
        self._worker.wait(timeout=60)


# --- Our runner's side --------------------------------------------------------------------------

def run_ours(rne_llm: Path, pte: Path, tokenizer: Path, prompt: str, max_new_tokens: int,
             speculative: dict[str, int] | None) -> dict:
    """One greedy rne_llm generation of ``prompt`` (the chat template applied by rne_llm), plain
    or with prompt lookup (``speculative``: rne_llm's --max-draft-tokens/--ngram-* values by
    flag name, empty for the defaults)."""
    flags: list[str] = []
    if speculative is not None:
        flags = ["--speculative", "prompt-lookup"]
        for name, value in speculative.items():
            flags += [f"--{name}", str(value)]
    done = subprocess.run(
        [str(rne_llm), "--json", "--model", str(pte), "--tokenizer", str(tokenizer),
         "--max-new-tokens", str(max_new_tokens), *flags, prompt],
        capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise click.ClickException(f"rne_llm failed: {done.stderr.strip()[-2000:]}")
    out = json.loads(done.stdout)
    stats = out["stats"]
    forwards = stats["decode_forwards"]
    return {
        "tokens": out["tokens"],
        "decode_tok_s": stats["decode_tokens_per_s"],
        "acceptance_rate": stats["acceptance_rate"] if speculative is not None else None,
        "tokens_per_forward": (stats["generated_tokens"] - 1) / forwards if forwards else None,
    }


# --- Tables -------------------------------------------------------------------------------------

def geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def print_tables(prompts: list[Prompt], best: dict[str, dict[str, Best]], modes: list[str],
                 plain_of: dict[str, str]) -> None:
    """One row per prompt: decode tok/s of each mode, and a speculative mode's speed-up over its
    engine's plain mode; then the geometric mean speed-up per group."""
    width = max(12, *(len(m) for m in modes))
    click.echo(f"\n{'prompt':20} {'tokens':>6} " + " ".join(f"{m:>{width}}" for m in modes))
    for p in prompts:
        cells = []
        for mode in modes:
            b = best[mode][p.id]
            cell = f"{b.decode_tok_s:6.1f}"
            if mode in plain_of:
                cell += f" {ratio(b.decode_tok_s, best[plain_of[mode]][p.id].decode_tok_s):4.2f}x"
            if b.acceptance_rate is not None:
                cell += f" {b.acceptance_rate:.0%}"
            cells.append(f"{cell:>{width}}")
        tokens = len(best[modes[0]][p.id].tokens)
        click.echo(f"{p.id:20} {tokens:6} " + " ".join(cells))
    click.echo("\nspeed-up over the same engine without prompt lookup (geometric mean):")
    for group in GROUPS.values():
        ids = [p.id for p in prompts if p.group == group]
        if not ids:
            continue
        parts = [f"{mode} {geomean([ratio(best[mode][i].decode_tok_s, best[plain][i].decode_tok_s) for i in ids]):.2f}x"  # noqa: E501
                 for mode, plain in plain_of.items()]
        click.echo(f"  {group:20}: " + ", ".join(parts))


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


@click.command()
@click.option("--llamacpp-python", type=click.Path(exists=True, path_type=Path), default=None,
              help="A Python with llama-cpp-python (0.3.36) installed; omit to skip llama.cpp.")
@click.option("--ours/--no-ours", default=False, show_default=True,
              help="Also run our runner (rne_llm with --speculative prompt-lookup).")
@click.option("--rne-llm", type=click.Path(exists=True, path_type=Path), default=None,
              help=f"The rne_llm to run (default {RNE_LLM.relative_to(REPO_ROOT)}).")
@click.option("--reference-rne-llm", type=click.Path(exists=True, path_type=Path), default=None,
              help="Another rne_llm build whose default prompt lookup runs as 'reference PLD'.")
@click.option("--held-out/--no-held-out", default=True, show_default=True,
              help="Also run the held-out prompts.")
@click.option("--verify-tokens", default=8, show_default=True,
              help="Our export's verify length (drafts per forward + 1).")
@click.option("--sweep", default="2,4,16", show_default=True,
              help="llama.cpp num_pred_tokens values run besides its default (10); '' for none.")
@click.option("--ours-sweep", default="2,4", show_default=True,
              help="Our --max-draft-tokens values run besides the default (verify length - 1).")
@click.option("--rounds", default=3, show_default=True)
@click.option("--max-new-tokens", default=256, show_default=True)
@click.option("--threads", default=2, show_default=True, help="llama.cpp threads.")
@click.option("--only", default="", help="Comma-separated prompt ids to run (default: all).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write every best run (tokens included) here.")
def main(llamacpp_python: Path | None, ours: bool, rne_llm: Path | None,
         reference_rne_llm: Path | None, held_out: bool, verify_tokens: int,
         sweep: str, ours_sweep: str, rounds: int, max_new_tokens: int, threads: int, only: str,
         json_path: Path | None) -> None:
    from rne_tools.gguf_import import default_checkpoint, packaged_gguf_path
    from rne_tools.registry import load_registry
    from rne_tools.runtime.text import ChatTokenizer

    if llamacpp_python is None and not ours:
        raise click.UsageError("nothing to run: give --llamacpp-python, --ours, or both")
    prompts = load_prompts(held_out)
    if only:
        wanted = set(only.split(","))
        unknown = wanted - {p.id for p in prompts}
        if unknown:
            raise click.UsageError(f"unknown prompt ids {sorted(unknown)} (see {PROMPTS.name})")
        prompts = [p for p in prompts if p.id in wanted]
    checkpoint = default_checkpoint("smollm2_135m")
    chat = ChatTokenizer(checkpoint)
    prompt_ids = {p.id: chat.user_prompt_ids(p.text) for p in prompts}

    # mode name -> how to run it on a prompt
    runners: dict[str, object] = {}
    plain_of: dict[str, str] = {}
    llama: LlamaCpp | None = None
    if llamacpp_python is not None:
        gguf = packaged_gguf_path(load_registry().model("smollm2_135m").source)
        llama = LlamaCpp(llamacpp_python, gguf, threads)
        click.echo(f"llama.cpp: llama-cpp-python {llama.version}, {gguf.name}, {threads} threads",
                   err=True)
        drafts = [LLAMACPP_DEFAULT_DRAFT, *(int(k) for k in sweep.split(",") if k)]
        runners["llama.cpp"] = lambda p, llm=llama: llm.run(prompt_ids[p.id], max_new_tokens, None)
        for k in drafts:
            mode = f"llama.cpp PLD{k}"
            runners[mode] = lambda p, k=k, llm=llama: llm.run(prompt_ids[p.id], max_new_tokens, k)
            plain_of[mode] = "llama.cpp"
    if ours:
        from rne_tools.export import cached_export

        binary = rne_llm or RNE_LLM
        if not binary.is_file():
            raise click.UsageError(f"{binary} is missing: build rne_llm (cpp/README.md) or pass "
                                   "--rne-llm")
        export = cached_export("smollm2_135m", "xnnpack", "8da4w", verify_tokens=verify_tokens)
        tokenizer = checkpoint / "tokenizer.json"
        runners["ours"] = lambda p: run_ours(binary, export.pte_path, tokenizer, p.text,
                                             max_new_tokens, None)
        runners["ours PLD"] = lambda p: run_ours(binary, export.pte_path, tokenizer, p.text,
                                                 max_new_tokens, {})
        plain_of["ours PLD"] = "ours"
        if reference_rne_llm is not None:
            runners["reference PLD"] = lambda p: run_ours(reference_rne_llm, export.pte_path,
                                                          tokenizer, p.text, max_new_tokens, {})
            plain_of["reference PLD"] = "ours"
        for k in (int(k) for k in ours_sweep.split(",") if k):
            mode = f"ours PLD{k}"
            runners[mode] = lambda p, k=k: run_ours(binary, export.pte_path, tokenizer, p.text,
                                                    max_new_tokens, {"max-draft-tokens": k})
            plain_of[mode] = "ours"

    best = {mode: {p.id: Best() for p in prompts} for mode in runners}
    try:
        for round_index in range(rounds):
            for p in prompts:
                for mode, run in runners.items():
                    result = run(p)  # type: ignore[operator]
                    best[mode][p.id].update(result)
                    click.echo(f"round {round_index + 1}/{rounds} {p.id:20} {mode:16} "
                               f"{len(result['tokens']):4} tokens {result['decode_tok_s']:7.1f} "
                               "tok/s", err=True)
    finally:
        if llama is not None:
            llama.close()

    # Greedy speculative decoding keeps the plain run's tokens; say so where it does not.
    for mode, plain in plain_of.items():
        for p in prompts:
            if best[mode][p.id].tokens != best[plain][p.id].tokens:
                click.echo(f"NOTE: {mode} generated other tokens than {plain} on {p.id}", err=True)
    print_tables(prompts, best, list(runners), plain_of)
    if json_path is not None:
        json_path.write_text(json.dumps(
            {mode: {pid: vars(b) for pid, b in rows.items()} for mode, rows in best.items()},
            indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Prefill and decode speed of the C++ runner against the runtime's limit and ExecuTorch's own
runner, plus sampler cost at Gemma's vocabulary size.

Prints numbers; asserts nothing about speed. On the same .pte file (default: SmolLM2-135M
xnnpack 8w, the demo's export, cached):

- our runner (rne::runner::TextGenerator) vs a bare ``Module::execute`` loop doing exactly the
  same forward calls (chunked prefill, T=1 decode, argmax) in the same process (``rne_bench``;
  target overhead < 3%);
- ExecuTorch's Python ``TextLLMRunner`` (``executorch.extension.llm.runner``) on the same file
  and tokenizer, with the same prompt length and number of new tokens, using its own stats.
  The three are interleaved round by round so they see the same machine load;
- sampler ms/token at vocab 262144 per configuration (target <= 1 ms).

Throughput is the best of ``--repeat`` runs: other load on a shared machine only slows a run
down. The sampler figure is the median over 200 calls.

    .venv/bin/python tools/benchmarks/runner_benchmark.py [--pte FILE --tokenizer FILE]
        [--prompt-tokens 128] [--new-tokens 64] [--repeat 5]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

# Run as a script from anywhere: make tools/ importable like the CLIs directly under it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rne_tools.paths import PACKAGE_DIR, REPO_ROOT  # noqa: E402

BUILD_DIR = REPO_ROOT / "build" / "host"
RNE_BENCH = BUILD_DIR / "host" / "rne_bench"

STORY = (
    "Write a long, detailed story about a lighthouse keeper on a remote island who finds a "
    "message in a bottle. Describe the island, the weather, the keeper's daily routine, the "
    "old lamp, the seabirds, the supply boat that comes once a month, and what the message "
    "says. "
)


def ensure_rne_bench() -> Path:
    """Configure and build the canonical host build (cpp/README.md) when rne_bench is missing."""
    cmake = REPO_ROOT / ".venv" / "bin" / "cmake"
    if not RNE_BENCH.is_file():
        subprocess.run([cmake, "-S", PACKAGE_DIR / "cpp", "-B", BUILD_DIR, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=sys.stderr)
    subprocess.run([cmake, "--build", BUILD_DIR, "-j", "2", "--target", "rne_bench"], check=True,
                   stdout=sys.stderr)
    return RNE_BENCH


def default_model(quantization: str) -> tuple[Path, Path]:
    from rne_tools.export import cached_export
    from rne_tools.gguf_import import default_checkpoint

    export = cached_export("smollm2_135m", "xnnpack", quantization)
    return export.pte_path, default_checkpoint("smollm2_135m") / "tokenizer.json"


def run_json(*args: object) -> dict:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise click.ClickException(f"{args[0]} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def prompt_with_tokens(tokenizer: Path, n: int) -> str:
    """A ChatML-wrapped request of about ``n`` tokens (the story text repeated and cut)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    body = STORY * (n // 40 + 2)
    ids = tok.encode(body, add_special_tokens=False).ids[: max(n - 10, 1)]
    text = tok.decode(ids)
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


class ExecuTorchTextRunner:
    """ExecuTorch's Python TextLLMRunner on the same file, one measured generation per call."""

    def __init__(self, pte: Path, tokenizer: Path, prompt: str, new_tokens: int) -> None:
        import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama:: kernels)
        import executorch.kernels.quantized  # noqa: F401  (quantized embedding kernels)
        from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

        self._runner = TextLLMRunner(str(pte), str(tokenizer))
        self._config = GenerationConfig(echo=False, max_new_tokens=new_tokens, temperature=0.0)
        self._prompt = prompt
        self.run()  # warm-up

    def run(self) -> dict:
        self._runner.reset()
        stats: list = []
        # The C++ runner prints the text and its stats to stdout itself: keep our output clean.
        sys.stdout.flush()
        saved = os.dup(1)
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            try:
                self._runner.generate(self._prompt, self._config, lambda _text: None,
                                      stats.append)
            finally:
                os.dup2(saved, 1)
                os.close(saved)
        return json.loads(stats[-1].to_json_string())


def executorch_runner_or_none(pte: Path, tokenizer: Path, prompt: str,
                              new_tokens: int) -> ExecuTorchTextRunner | None:
    try:
        return ExecuTorchTextRunner(pte, tokenizer, prompt, new_tokens)
    except (ImportError, RuntimeError) as err:
        click.echo(f"ExecuTorch TextLLMRunner unavailable: {err}", err=True)
        return None


@click.command()
@click.option("--pte", type=click.Path(exists=True, path_type=Path), default=None,
              help="Model file (default: SmolLM2-135M xnnpack, the demo's export, cached).")
@click.option("--quantization", default="8w", show_default=True,
              help="Quantization of the default SmolLM2 export (8w, fp32, 8da4w or 8da8w).")
@click.option("--tokenizer", type=click.Path(exists=True, path_type=Path), default=None,
              help="tokenizer.json for the ExecuTorch runner (default: SmolLM2's).")
@click.option("--prompt-tokens", default=128, show_default=True)
@click.option("--new-tokens", default=64, show_default=True)
@click.option("--repeat", default=5, show_default=True,
              help="Runs per measurement; the best run counts (load only slows runs down).")
@click.option("--sampler-vocab", default=262144, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def main(pte: Path | None, quantization: str, tokenizer: Path | None, prompt_tokens: int,
         new_tokens: int, repeat: int, sampler_vocab: int, as_json: bool) -> None:
    if (pte is None) != (tokenizer is None):
        raise click.UsageError("--pte and --tokenizer go together")
    if pte is None:
        pte, tokenizer = default_model(quantization)
    bench = ensure_rne_bench()

    et_runner = executorch_runner_or_none(pte, tokenizer,
                                          prompt_with_tokens(tokenizer, prompt_tokens), new_tokens)
    et = None
    if et_runner is not None:
        # Same prompt length and number of new tokens as ExecuTorch's runner actually did.
        probe = et_runner.run()
        prompt_tokens, new_tokens = probe["prompt_tokens"], max(probe["generated_tokens"], 2)
    # Interleaved, one run of each per round, so all three see the same machine load.
    et_runs, ours_runs = [], []
    for _ in range(repeat):
        if et_runner is not None:
            et_runs.append(et_runner.run())
        ours_runs.append(run_json(bench, "--model", pte, "--prompt-tokens", prompt_tokens,
                                  "--new-tokens", new_tokens, "--repeat", 2))
    ours = {kind: {key: max(r[kind][key] for r in ours_runs)
                   for key in ("prefill_tok_s", "decode_tok_s")} for kind in ("bare", "runner")}
    if et_runs:
        et = {"prefill_tok_s": max(r["prefill_token_per_sec"] for r in et_runs),
              "decode_tok_s": max(r["decode_token_per_sec"] for r in et_runs),
              "generated_tokens": min(r["generated_tokens"] for r in et_runs)}
    sampler = run_json(bench, "--sampler-vocab", sampler_vocab, "--iterations", 200)

    def overhead(kind: str) -> float:
        bare, runner = ours["bare"][kind], ours["runner"][kind]
        return 100.0 * (bare - runner) / bare

    result = {"model": str(pte), "prompt_tokens": prompt_tokens, "new_tokens": new_tokens,
              "bare_module_execute": ours["bare"], "rne_runner": ours["runner"],
              "runner_overhead_percent": {"prefill": overhead("prefill_tok_s"),
                                          "decode": overhead("decode_tok_s")},
              "executorch_text_llm_runner": et, "sampler": sampler}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"model {pte} | prompt {prompt_tokens} tokens | {new_tokens} new tokens | "
               f"best of {repeat} runs")
    click.echo(f"{'':34}{'prefill tok/s':>15}{'decode tok/s':>15}")
    rows = [("bare Module::execute loop", ours["bare"]), ("rne runner (TextGenerator)", ours["runner"])]
    if et is not None:
        rows.append(("ExecuTorch TextLLMRunner (Python)", et))
    for name, r in rows:
        click.echo(f"{name:34}{r['prefill_tok_s']:>15.1f}{r['decode_tok_s']:>15.1f}")
    o = result["runner_overhead_percent"]
    click.echo(f"runner overhead vs bare loop: prefill {o['prefill']:+.1f}%, "
               f"decode {o['decode']:+.1f}% (target < 3%)")
    click.echo(f"sampler at vocab {sampler['vocab_size']} (context {sampler['context_tokens']} "
               "tokens for the repetition penalty), ms/token (target <= 1 ms):")
    for name, ms in sampler["ms_per_token"].items():
        click.echo(f"  {name:45}{ms:8.3f}")


if __name__ == "__main__":
    main()

"""How much of each turn a conversation prefills again, with and without ring checkpoints (issue 34).

A 10-turn chat in Gemma 4's real chat template (the fixture from llama.cpp) and its real special
tokens (the Gemma-4-shaped tokenizer), through our runner (``rne_turns``: TextGenerator, the
host build), on a tiny random Gemma 4 whose sliding window is small against the conversation, so
the history passes several windows. The template re-renders the last answer differently from
what was generated (the generation prompt's empty thought channel is dropped), so every turn
diverges from the cache a few tokens before the end of the previous prompt. Without checkpoints
the sliding layers' rings have turned past that point and the whole conversation is prefilled
again; with them the runner rewinds to the checkpoint it saved 16 tokens before that end.

Prints, per turn: the prompt's length, the tokens reused from the cache and the tokens prefilled,
both ways, and the largest difference of the next-token logits from a cold prefill of the same
prompt (with their spread for scale). Asserts nothing.

    .venv/bin/python tools/benchmarks/multiturn_reuse_benchmark.py [--turns 10] [--window 64]
    .venv/bin/python tools/benchmarks/multiturn_reuse_benchmark.py --widths e2b --window 512 \\
        --max-context 4096 --max-chunk 128 --answer-tokens 200
"""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rne_tools.paths import REPO_ROOT  # noqa: E402

FIXTURES = REPO_ROOT / "packages" / "react-native-executorch" / "__tests__" / "fixtures"
TEMPLATE = FIXTURES / "gemma4" / "gemma4.jinja"
RNE_TURNS = REPO_ROOT / "build" / "host" / "host" / "rne_turns"

# Questions of a few dozen tokens each: the history passes 3x the window within a few turns.
QUESTIONS = [
    "Tell me about the history of the printing press and how it changed the spread of ideas.",
    "How does a refrigerator move heat out of its inside when the kitchen is warmer?",
    "Which rivers flow through Kraków, Prague and Vienna, and which of them is the longest?",
    "Explain the difference between a virus and a bacterium to a curious ten-year-old.",
    "What should I pack for a three-day hike in the Tatra mountains in early October?",
    "Why do cats purr, and do big cats like lions purr the same way?",
    "Summarise the rules of chess castling, including the cases where it is not allowed.",
    "How do noise-cancelling headphones work, and why do they struggle with voices?",
    "Give me three ideas for a vegetarian dinner that takes under thirty minutes.",
    "What is the Fibonacci sequence and where does it show up in nature?",
    "How far is the Moon, and how long did the Apollo missions take to get there?",
    "Write a short haiku about the first snow of the winter in a quiet city.",
]


def _fixtures_module():
    spec = importlib.util.spec_from_file_location("make_gemma4_fixtures",
                                                  FIXTURES / "make_gemma4_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


# E2B's widths (hidden, heads, head dims, FFN, per-layer inputs, softcap) at 5 of its 35 layers
# (one 4-sliding + 1-full cycle, no KV-shared layers), so the export fits this machine. The
# rings are E2B's: 512 slots of one 256-wide KV head per sliding layer.
E2B_WIDTHS = {
    "hidden_size": 1536,
    "intermediate_size": 6144,
    "num_attention_heads": 8,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "global_head_dim": 512,
    "hidden_size_per_layer_input": 256,
    "num_hidden_layers": 5,
    "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
    "num_kv_shared_layers": 0,
    "final_logit_softcapping": 30.0,
}


def _model(widths: str, window: int, max_context: int, max_chunk: int) -> Path:
    """A random Gemma 4 (tiny, or E2B's widths) with Gemma 4's vocabulary size (so real token
    ids fit)."""
    from rne_tools.export import cached_export
    from rne_tools.models import gemma4

    config = copy.deepcopy(gemma4.RANDOM_CONFIGS["tiny"])
    if widths == "e2b":
        config.update(E2B_WIDTHS)
    config.update(vocab_size=262144, vocab_size_per_layer_input=262144, sliding_window=window)
    return cached_export("gemma4_e2b", "xnnpack", "fp32", random_config=config,
                         max_context=max_context, max_chunk=max_chunk).pte_path


def _conversation(tokenizer: PreTrainedTokenizerFast, rne_turns: Path, pte: Path, turns: int, answer_tokens: int,
                  checkpoints: bool) -> list[dict]:
    """Runs the chat; the answers are the model's own (random weights: any text)."""
    args = [str(rne_turns), "--model", str(pte), "--answer-tokens", str(answer_tokens),
            "--check-cold"] + ([] if checkpoints else ["--no-checkpoints"])
    process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    messages: list[dict] = []
    rows = []
    for turn in range(turns):
        messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        process.stdin.write(",".join(map(str, ids)) + "\n")
        process.stdin.flush()
        row = json.loads(process.stdout.readline())
        row["length"] = len(ids)
        rows.append(row)
        answer = tokenizer.decode(row["answer"], skip_special_tokens=True)
        messages.append({"role": "assistant", "content": answer})
    process.stdin.close()
    if process.wait() != 0:
        raise click.ClickException(f"rne_turns failed (exit {process.returncode})")
    return rows


@click.command()
@click.option("--turns", default=10, show_default=True)
@click.option("--widths", type=click.Choice(["tiny", "e2b"]), default="tiny", show_default=True,
              help="The random model's layer widths: tiny, or E2B's (at 5 layers).")
@click.option("--window", default=64, show_default=True, help="Sliding window of the model.")
@click.option("--max-context", default=2048, show_default=True)
@click.option("--max-chunk", default=32, show_default=True)
@click.option("--answer-tokens", default=48, show_default=True)
@click.option("--rne-turns", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=RNE_TURNS, show_default=True)
def main(turns: int, widths: str, window: int, max_context: int, max_chunk: int,
         answer_tokens: int, rne_turns: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    fixtures = _fixtures_module()
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(fixtures.gemma4_shaped_tokenizer_json()),
                                        chat_template=TEMPLATE.read_text(), **fixtures.CONFIG)
    pte = _model(widths, window, max_context, max_chunk)
    before = _conversation(tokenizer, rne_turns, pte, turns, answer_tokens, checkpoints=False)
    after = _conversation(tokenizer, rne_turns, pte, turns, answer_tokens, checkpoints=True)
    click.echo(f"{widths} Gemma 4 (random weights), sliding window {window}, XNNPACK fp32, "
               f"max_chunk {max_chunk}; {answer_tokens}-token greedy answers; Gemma 4's template")
    click.echo("turn  prompt  | no checkpoints: reused prefilled | checkpoints: reused prefilled"
               " | max|dlogit| vs cold (logit std)")
    for i, (b, a) in enumerate(zip(before, after, strict=True), 1):
        click.echo(f"{i:>4}  {a['length']:>6}  | {b['reused']:>22} {b['prompt']:>9} | "
                   f"{a['reused']:>19} {a['prompt']:>9} | {a['cold_max_abs_diff']:.2e} "
                   f"({a['logit_std']:.2f})")
    total = {k: sum(r["prompt"] for r in rows) for k, rows in (("before", before), ("after", after))}
    click.echo(f"prefilled over {turns} turns: {total['before']} without checkpoints, "
               f"{total['after']} with ({total['after'] / max(total['before'], 1):.0%})")


if __name__ == "__main__":
    main()

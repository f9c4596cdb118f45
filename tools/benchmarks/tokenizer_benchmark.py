"""Encode throughput of the C++ tokenizer (rne_tokenize) against HF `tokenizers`.

Prints numbers; asserts nothing about speed. Both sides encode the same documents without
special tokens, single-threaded (HF `encode` in a loop; `encode_batch`, which uses every core,
is printed for reference), after one warm-up pass so both per-word caches are filled the same
way. Token counts must agree, or the comparison is meaningless and the script fails.

    .venv/bin/python tools/benchmarks/tokenizer_benchmark.py [--corpus-mb 4] [--repeat 3]
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import click

# Run as a script from anywhere: make tools/ importable like the CLIs directly under it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rne_tools import cpp_tokenizer  # noqa: E402
from rne_tools.paths import CACHE_DIR  # noqa: E402


def build_corpus(target_bytes: int) -> list[str]:
    """~target_bytes of documents (~4 KB each): stdlib source and docs (English prose and code)
    interleaved with multilingual text (accents, CJK, emoji, digits)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    multilingual = (
        "Le café coûte 3,50 € à Paris ; ça va ? Über 1.234 Brücken fährt man in München. "
        "東京は日本の首都で、人口は約1400万人です。北京是中国的首都。서울은 한국의 수도입니다. "
        "Emoji 🎉😀👍🏽 and numbers 2024-06-01 12:34:56 ٣٤٥.\n"
    )
    documents: list[str] = []
    size = 0
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for start in range(0, len(text), 4000):
            chunk = text[start : start + 4000]
            if len(documents) % 4 == 3:
                chunk = multilingual * 20
            documents.append(chunk)
            size += len(chunk.encode())
            if size >= target_bytes:
                return documents
    return documents


def bench_hf(tokenizer_json: Path, documents: list[str], repeat: int) -> dict:
    from tokenizers import Tokenizer

    start = time.perf_counter()
    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    load = time.perf_counter() - start
    for doc in documents:  # warm-up
        tokenizer.encode(doc, add_special_tokens=False)
    tokens = 0
    start = time.perf_counter()
    for _ in range(repeat):
        for doc in documents:
            tokens += len(tokenizer.encode(doc, add_special_tokens=False).ids)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(repeat):
        tokenizer.encode_batch(documents, add_special_tokens=False)
    batch_seconds = time.perf_counter() - start
    return {"load_seconds": load, "tokens": tokens, "seconds": seconds,
            "batch_seconds": batch_seconds}


def bench_cpp(binary: Path, tokenizer_json: Path, corpus_file: Path, repeat: int) -> dict:
    # repeat + 1 passes, then subtract a 1-pass run: the first pass is the warm-up.
    def run(passes: int) -> dict:
        out = subprocess.run(
            [str(binary), str(tokenizer_json), "--bench", str(corpus_file), str(passes)],
            capture_output=True, text=True, check=True,
        )
        return json.loads(out.stdout)

    one = run(1)
    many = run(repeat + 1)
    return {"load_seconds": one["load_seconds"], "tokens": many["tokens"] - one["tokens"],
            "seconds": many["seconds"] - one["seconds"]}


@click.command()
@click.option("--corpus-mb", default=4.0, show_default=True, help="Corpus size in MB.")
@click.option("--repeat", default=3, show_default=True, help="Timed passes over the corpus.")
def main(corpus_mb: float, repeat: int) -> None:
    documents = build_corpus(int(corpus_mb * 1e6))
    corpus_bytes = sum(len(d.encode()) for d in documents)
    corpus_file = CACHE_DIR / "benchmarks" / "tokenizer_corpus.jsonl"
    corpus_file.parent.mkdir(parents=True, exist_ok=True)
    corpus_file.write_text("".join(json.dumps(d) + "\n" for d in documents))

    binary = cpp_tokenizer.rne_tokenize_binary()
    tokenizers = {
        "SmolLM2 (byte-level BPE, 49k)": cpp_tokenizer.smollm2_tokenizer_json(),
        "Gemma 3 (byte-fallback BPE, 262k)": cpp_tokenizer.gemma3_tokenizer_json(),
        "Gemma-style (byte-fallback BPE, 3k, trained here)": cpp_tokenizer.gemma_style_tokenizer_json(),
    }
    click.echo(f"corpus: {len(documents)} documents, {corpus_bytes / 1e6:.2f} MB, "
               f"{repeat} timed passes, single thread")
    for name, path in tokenizers.items():
        cpp = bench_cpp(binary, path, corpus_file, repeat)
        hf = bench_hf(path, documents, repeat)
        if cpp["tokens"] != hf["tokens"]:
            raise click.ClickException(
                f"{name}: token counts differ (C++ {cpp['tokens']}, HF {hf['tokens']})"
            )
        mb = corpus_bytes * repeat / 1e6
        click.echo(f"\n{name}: {hf['tokens'] // repeat} tokens per pass")
        click.echo(f"  C++ rne_tokenizer  : {mb / cpp['seconds']:7.2f} MB/s "
                   f"{cpp['tokens'] / cpp['seconds'] / 1e6:6.2f} M tokens/s  "
                   f"load {cpp['load_seconds'] * 1e3:7.1f} ms")
        click.echo(f"  HF tokenizers      : {mb / hf['seconds']:7.2f} MB/s "
                   f"{hf['tokens'] / hf['seconds'] / 1e6:6.2f} M tokens/s  "
                   f"load {hf['load_seconds'] * 1e3:7.1f} ms")
        click.echo(f"  HF encode_batch    : {mb / hf['batch_seconds']:7.2f} MB/s (all cores)")
        click.echo(f"  C++ / HF (1 thread): {hf['seconds'] / cpp['seconds']:.2f}x")


if __name__ == "__main__":
    main()

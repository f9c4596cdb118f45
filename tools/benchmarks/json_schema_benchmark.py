"""JSON-Schema-constrained generation: what the token mask costs, and how often output is valid.

Prints numbers; asserts nothing about speed or quality.

``mask``: the constraint's cost per token at vocab 262,144 (Gemma 3's real tokenizer, the
vocabulary of Gemma 3/4). For each of the 20 schema templates in ``data/json_schema_pairs.json``
a realistic document (multi-word strings, some non-ASCII, numbers, arrays, nested objects) is
tokenized and replayed through ``rne_json_mask_bench`` as if a model had generated it, under the
tightest token budget it fits in (so the budget checks near its end are included): per token,
the time to compute the allowed-token mask, and the sampler's time with the mask applied vs.
without. "cold" is the first generation with a schema (nothing cached); "warm" a later one.
Target: median mask cost < 1 ms per token. Measured (2 idle cores, with the budget-aware
close): median 0.018 ms cold / 0.004 ms warm, p95 0.053 / 0.021 ms, cold max 12.7 ms (the
first walk of a frame over the whole vocabulary); the sampler 0.163 ms with the mask, 0.127 ms
without.

``validity``: the 200 schema/prompt pairs (20 templates x 10 subjects) answered by SmolLM2-135M
(the real exported .pte, cached) through ``rne_llm``: constrained (``--json-schema``) vs. the
parse-and-repair baseline (the same prompt, which includes the schema, generated without the
constraint, then repaired: code fences and text around the JSON dropped, trailing commas
removed, unclosed strings/brackets closed). Each output is parsed with ``json.loads`` and
validated with ``jsonschema``; prints both rates. Target: 100% for the constrained runs.
Constrained answers that used half the budget or more are run again with 4x the budget; where
that answer differs (greedy is deterministic), the budget closed it: those are listed.
Bounded in time by ``--max-new-tokens`` (default 96) and ``--limit`` (pairs, default all 200,
interleaved over the templates); on 2 busy cores a pair takes ~10 s constrained and ~15 s for
the baseline, so ``--limit 40`` is ~17 min and the full 200 ~85 min (``--modes constrained``:
~35 min; 5 min on 2 idle cores). Measured (greedy): 200 pairs constrained 100% parse+validate
(200/200). 12 of them were closed by the 96-token budget: the 135M model repeated itself inside
a string (``"john_john_john_..."``), the constraint cut that string and the model then wrote
the remaining required properties in the tokens kept for them, often cut short too
(``"email": "john_john_"``); one answer's array got one item instead of two. Before the
budget-aware close, 12 answers were cut off by the token limit: 188/200 (94%). First 40 pairs
(before the close, unchanged since): baseline 80% parse and 0% validate.
With ``--repetition-penalty 1.2`` (first 40 pairs): constrained 100% (40/40), 5 closed by the
budget (before the close 87.5%: strings not closed within 96 tokens, the penalty hits the quote
token; the strings now run on into nonsense until the budget cuts them).

    .venv/bin/python tools/benchmarks/json_schema_benchmark.py mask \
        [--bench NEW_RNE_JSON_MASK_BENCH --baseline-bench OLD_RNE_JSON_MASK_BENCH --rounds 5]
    .venv/bin/python tools/benchmarks/json_schema_benchmark.py validity [--limit 40] [--modes constrained]
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

# Run as a script from anywhere: make tools/ importable like the CLIs directly under it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rne_tools.paths import PACKAGE_DIR, REPO_ROOT  # noqa: E402

BUILD_DIR = REPO_ROOT / "build" / "host"
PAIRS_FILE = Path(__file__).resolve().parent / "data" / "json_schema_pairs.json"

# Values a realistic answer holds: several words, punctuation, non-ASCII.
PHRASES = [
    "Alexandra Petrova", "São Paulo", "The Quiet Harbour", "Zürich", "long-distance running",
    "a small café near the old town square", "New York City", "Dr. Amelia Chen",
    "fresh basil, olive oil & garlic", "Kraków", "watercolour landscapes", "the year's best",
    "Mount Kilimanjaro", "North Atlantic", "customer-friendly", "Île-de-France", "ramen",
]


def ensure_target(target: str) -> Path:
    """Builds `target` in the canonical host build (cpp/README.md), configuring it if needed."""
    cmake = REPO_ROOT / ".venv" / "bin" / "cmake"
    if not (BUILD_DIR / "CMakeCache.txt").is_file():
        subprocess.run([cmake, "-S", PACKAGE_DIR / "cpp", "-B", BUILD_DIR, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=sys.stderr)
    subprocess.run([cmake, "--build", BUILD_DIR, "-j", "2", "--target", target], check=True,
                   stdout=sys.stderr)
    found = list(BUILD_DIR.rglob(target))
    if not found:
        raise click.ClickException(f"{target} was not built under {BUILD_DIR}")
    return found[0]


def load_pairs() -> list[dict]:
    """The 200 schema/prompt pairs: each template's prompt filled with each of its subjects."""
    templates = json.loads(PAIRS_FILE.read_text())["templates"]
    pairs = []
    for subject_index in range(10):  # interleaved, so --limit covers every template
        for template in templates:
            subject = template["subjects"][subject_index]
            pairs.append({"name": template["name"], "schema": template["schema"],
                          "task": template["prompt"].replace("{s}", subject)})
    return pairs


def example_document(schema: dict, rng: random.Random) -> object:
    """A value valid against `schema` (the subset the templates use), with realistic content."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice([k for k in kind if k != "null"] or ["null"])
    if kind == "object":
        return {key: example_document(sub, rng) for key, sub in schema["properties"].items()}
    if kind == "array":
        count = rng.randint(max(1, schema.get("minItems", 0)), schema.get("maxItems", 3))
        return [example_document(schema["items"], rng) for _ in range(count)]
    if kind == "string":
        return rng.choice(PHRASES)
    if kind == "integer":
        return rng.randint(0, 2030)
    if kind == "number":
        return round(rng.uniform(-50, 500), rng.randint(0, 2))
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@click.group()
def cli() -> None:
    """JSON-Schema-constrained generation benchmarks."""


def _mask_run(bench: Path, tokenizer: Path, cases: Path) -> tuple[dict, list[dict]]:
    run = subprocess.run([bench, "--tokenizer", tokenizer, "--cases", cases],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise click.ClickException(f"{bench}: {run.stderr.strip()}")
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    return rows[0], rows[1:]


def _mask_stats(results: list[dict], name: str) -> dict[str, float]:
    """Milliseconds: the pass's mask median, p95 and max, and the sampler's medians."""
    selected = [r for r in results if r["pass"] == name]
    mask_us = [v for r in selected for v in r["mask_us"]]
    return {
        "median": statistics.median(mask_us) / 1000,
        "p95": percentile(mask_us, 0.95) / 1000,
        "max": max(mask_us) / 1000,
        "masked": statistics.median([v for r in selected for v in r["masked_sample_us"]]) / 1000,
        "plain": statistics.median([v for r in selected for v in r["plain_sample_us"]]) / 1000,
    }


@cli.command()
@click.option("--tokenizer", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="tokenizer.json (default: Gemma 3's real 262,144-token tokenizer)")
@click.option("--bench", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="rne_json_mask_bench to time (default: the host build's, built if needed)")
@click.option("--baseline-bench", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a second rne_json_mask_bench (a build from before a change), timed in turn")
@click.option("--rounds", type=click.IntRange(1, 50), default=1, show_default=True,
              help="runs of each build, interleaved; each number is the best round's")
def mask(tokenizer: Path | None, bench: Path | None, baseline_bench: Path | None,
         rounds: int) -> None:
    """Mask cost per token at a 262k vocabulary."""
    from rne_tools.cpp_tokenizer import gemma3_tokenizer_json

    builds = {"ours": bench or ensure_target("rne_json_mask_bench")}
    if baseline_bench is not None:
        builds["baseline"] = baseline_bench
    tokenizer = tokenizer or gemma3_tokenizer_json()
    rng = random.Random(0)
    templates = json.loads(PAIRS_FILE.read_text())["templates"]
    best: dict[tuple[str, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cases = Path(tmp) / "cases.jsonl"
        with cases.open("w") as out:
            for template in templates:
                document = json.dumps(example_document(template["schema"], rng), ensure_ascii=False)
                out.write(json.dumps({"schema": json.dumps(template["schema"]),
                                      "document": document}) + "\n")
        for _ in range(rounds):
            for build, path in builds.items():
                header, results = _mask_run(path, tokenizer, cases)
                for name in ("cold", "warm"):
                    stats = _mask_stats(results, name)
                    kept = best.setdefault((build, name), stats)
                    best[(build, name)] = {k: min(v, kept[k]) for k, v in stats.items()}
    print(f"masks over {header['vocab_size']} ids ({tokenizer}'s tokens + the replay's EOS); "
          f"once per tokenizer: token bytes "
          f"{header['token_bytes_ms']:.0f} ms, trie build {header['trie_build_ms']:.0f} ms "
          f"({header['trie_nodes']} nodes)")
    print(f"{len(templates)} documents, {sum(r['tokens'] for r in results) // 2} tokens "
          f"(EOS included) per pass; best of {rounds} round(s) per build")
    print(f"{'build':<10}{'pass':<6}{'mask median':>14}{'mask p95':>12}{'mask max':>12}"
          f"{'sample+mask med':>18}{'sample med':>13}")
    for (build, name), s in best.items():
        print(f"{build:<10}{name:<6}{s['median']:>11.4f} ms{s['p95']:>9.4f} ms{s['max']:>9.3f} ms"
              f"{s['masked']:>15.3f} ms{s['plain']:>10.3f} ms")
    print("target: median mask cost < 1 ms per token")


def repair(text: str) -> str:
    """The parse-and-repair baseline: the JSON part of `text`, with trailing commas removed and
    unclosed strings and brackets closed."""
    text = text.replace("```json", "").replace("```", "")
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return text.strip()
    text = text[min(starts):]
    out, stack, in_string, escaped = [], [], False, False
    for ch in text:
        out.append(ch)
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if stack:
                stack.pop()
            if not stack:
                break  # the first complete value; drop what follows
    repaired = "".join(out)
    if in_string:
        repaired += '"'
    repaired = repaired.rstrip().rstrip(",")
    repaired += "".join(reversed(stack))
    for closer in ("}", "]"):
        repaired = repaired.replace("," + closer, closer).replace(", " + closer, closer)
    return repaired


def judge(text: str, schema: dict) -> tuple[bool, bool]:
    """(parses, validates)."""
    import jsonschema

    try:
        value = json.loads(text)
    except ValueError:
        return False, False
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return True, False
    return True, True


@cli.command()
@click.option("--limit", type=click.IntRange(1, 200), default=200, show_default=True,
              help="pairs to run (interleaved over the 20 templates)")
@click.option("--max-new-tokens", type=click.IntRange(8, 512), default=96, show_default=True)
@click.option("--repetition-penalty", type=float, default=1.0, show_default=True,
              help="both modes; above 1 it penalises the JSON's own quotes and commas")
@click.option("--modes", type=click.Choice(["both", "constrained"]), default="both",
              show_default=True, help="'constrained' skips the baseline (half the time)")
def validity(limit: int, max_new_tokens: int, repetition_penalty: float, modes: str) -> None:
    """Parse+validate rate: constrained vs. parse-and-repair, SmolLM2 on 200 pairs."""
    from rne_tools.cpp_tokenizer import smollm2_tokenizer_json
    from rne_tools.export import cached_export

    rne_llm = ensure_target("rne_llm")
    export = cached_export("smollm2_135m", "xnnpack", "fp32", progress=False)
    tokenizer = smollm2_tokenizer_json()
    pairs = load_pairs()[:limit]
    run_modes = ("constrained", "repair") if modes == "both" else ("constrained",)
    tally = {mode: {"parse": 0, "valid": 0, "seconds": 0.0} for mode in run_modes}
    failures: list[str] = []
    budget_closed: list[str] = []  # constrained answers the token budget closed early
    budget_checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        schema_file = Path(tmp) / "schema.json"
        for index, pair in enumerate(pairs):
            schema_file.write_text(json.dumps(pair["schema"]))
            prompt = (f"{pair['task']}\nAnswer with only a JSON value that follows this JSON "
                      f"Schema:\n{json.dumps(pair['schema'])}")
            for mode in run_modes:
                command = [rne_llm, "--model", export.pte_path, "--tokenizer", tokenizer, "--json",
                           "--max-new-tokens", str(max_new_tokens),
                           "--repetition-penalty", str(repetition_penalty), prompt]
                if mode == "constrained":
                    command[1:1] = ["--json-schema", schema_file]
                start = time.perf_counter()
                run = subprocess.run(command, capture_output=True, text=True)
                tally[mode]["seconds"] += time.perf_counter() - start
                if run.returncode != 0:
                    raise click.ClickException(f"rne_llm failed on pair {index}: {run.stderr}")
                answer = json.loads(run.stdout)
                text = answer["text"]
                parses, valid = judge(text if mode == "constrained" else repair(text),
                                      pair["schema"])
                tally[mode]["parse"] += parses
                tally[mode]["valid"] += valid
                if mode == "constrained" and not valid:
                    failures.append(f"pair {index} ({pair['name']}): {text!r}")
                if (mode == "constrained"
                        and answer["stats"]["generated_tokens"] >= max_new_tokens // 2):
                    # Greedy is deterministic: if 4x the budget gives another answer, the
                    # budget closed this one.
                    budget_checked += 1
                    longer = command[:]
                    longer[longer.index("--max-new-tokens") + 1] = str(4 * max_new_tokens)
                    run = subprocess.run(longer, capture_output=True, text=True)
                    if run.returncode != 0:
                        raise click.ClickException(f"rne_llm failed on pair {index}: {run.stderr}")
                    unbounded = json.loads(run.stdout)["text"]
                    if unbounded != text:
                        budget_closed.append(f"pair {index} ({pair['name']}): {text!r}, with "
                                             f"{4 * max_new_tokens} tokens {unbounded!r}")
            done = index + 1
            counts = ", ".join(f"{mode} {tally[mode]['valid']}/{done} valid" for mode in run_modes)
            print(f"[{done}/{len(pairs)}] {counts}", file=sys.stderr, flush=True)
    print(f"SmolLM2-135M fp32, {len(pairs)} schema/prompt pairs, max {max_new_tokens} new tokens, "
          f"greedy, repetition penalty {repetition_penalty}")
    labels = {"constrained": "constrained (--json-schema)", "repair": "parse-and-repair baseline"}
    for mode in run_modes:
        t, label = tally[mode], labels[mode]
        print(f"{label:<30} parses {100 * t['parse'] / len(pairs):5.1f}%  "
              f"parses+validates {100 * t['valid'] / len(pairs):5.1f}%  "
              f"({t['seconds'] / len(pairs):.1f} s per pair)")
    if "constrained" in run_modes:
        print(f"constrained answers closed by the token budget (a different answer with "
              f"{4 * max_new_tokens} tokens; of {budget_checked} that used half the budget or "
              f"more): {len(budget_closed)}")
    for closed in budget_closed:
        print("closed by the budget:", closed)
    for failure in failures:
        print("constrained output not valid:", failure)


if __name__ == "__main__":
    cli()

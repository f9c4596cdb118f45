"""Constrained-decoding engines side by side on one JSON Schema corpus and one vocabulary.

Engines: ours (the C++ JsonSchemaConstraint, driven through ``rne_json_mask_bench --report``),
XGrammar and llguidance (their PyPI wheels, pinned in requirements-structured-output.txt and
installed into a venv of their own, never the project's). Vocabulary: the Gemma-4-shaped
tokenizer (Gemma 3's real 262k-token tokenizer.json with Gemma 4's special tokens; built and
cached by packages/react-native-executorch/__tests__/fixtures/make_gemma4_fixtures.py). Each
engine reads that tokenizer.json its own way, as it would in an app.

Corpus: data/schemas/ (manifest.json gives each file's source, commit and license), in five
categories: the official JSON-Schema-Test-Suite (draft 2020-12 and draft 7; every test group's
schema is one case), function-calling tool schemas, Zod 4 ``z.toJSONSchema`` output,
SchemaStore configuration schemas, and components of public OpenAPI specs (openapi/extract.py
says which and how).

Per engine and category:
- coverage: schemas the engine compiles (its refusals are listed by message);
- compile time per schema (median, p95, max);
- mask time per token (median, p95), the first mask of each walk left out (it is reported
  apart: the lazy engines do their one-off work there): along a valid document (the test suite's
  own valid instances; for the other categories the instances beside the schema or a minimal one
  built here and checked with jsonschema) and along the engine's own random samples;
- memory: peak RSS of the engine's worker over the category minus its RSS once the vocabulary
  is loaded (and the vocabulary's own cost);
- compliance: per compiled schema, a few random samples under the engine's mask (random choice
  among allowed tokens; 70% of the steps among the single-byte tokens and EOS, so that strings
  and containers end), each parsed and validated with ``jsonschema`` (the schema's draft, formats
  checked). A sample still open after --max-tokens is "unfinished", not a violation (ours closes
  every document within its budget; the libraries have no budget);
- robustness: every engine runs in a worker subprocess, each schema under --timeout; a crash or
  hang is recorded and the worker restarted.

The engines are configured alike: compact JSON (no whitespace, "," and ":" separators) and JSON
Schema's own semantics (XGrammar strict_mode=False: undeclared properties allowed unless the
schema forbids them; ours never generates them). XGrammar compiles with one thread and no cache.

    build/bench-venv/bin/python tools/benchmarks/structured_output_benchmark.py run \\
        --markdown docs/structured-output.md
    # ours only, a few schemas (no bench venv needed):
    .venv/bin/python tools/benchmarks/structured_output_benchmark.py run --engines ours --limit 3

Set up the bench venv (pinned, no dependency resolution):
    python3.11 -m venv build/bench-venv
    build/bench-venv/bin/pip install --no-deps -r tools/benchmarks/requirements-structured-output.txt
"""

from __future__ import annotations

import json
import math
import os
import queue
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
CORPUS = HERE / "data" / "schemas"
CATEGORIES = ("test_suite", "function_calling", "zod", "schemastore", "openapi")
ENGINES = ("ours", "xgrammar", "llguidance")
EOS_ID = 1  # Gemma's <eos>
SHORT_STEP_SHARE = 0.7  # sampling: the share of steps that pick among single-byte tokens/EOS
BENCH_TARGET = "rne_json_mask_bench"


class BenchError(click.ClickException):
    """A setup problem the benchmark cannot go past (missing tokenizer, engine, build)."""


@dataclass
class Case:
    id: str
    category: str
    schema: Any
    draft: str  # "2020-12" or "7": the jsonschema validator for compliance
    document: str | None  # a valid instance as compact JSON, or None


@dataclass
class Result:
    case: Case
    compiled: bool = False
    error: str = ""
    failure: str = ""  # "crash ..." / "timeout ...": the worker died or ran past --timeout
    compile_ms: float = 0.0
    first_mask_us: list[float] = field(default_factory=list)
    mask_us: list[float] = field(default_factory=list)
    walk_rejected: bool | None = None  # None: no document
    samples: int = 0
    valid: int = 0
    unfinished: int = 0
    unchecked: int = 0  # jsonschema itself could not evaluate the schema (e.g. a remote $ref)
    invalid: list[str] = field(default_factory=list)
    memory_bytes: int | None = None  # the engine's own size of the compiled schema


# --- corpus -----------------------------------------------------------------------------------


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def load_corpus(categories: tuple[str, ...]) -> list[Case]:
    """Every case of the chosen categories, in a fixed order."""
    cases: list[Case] = []
    if "test_suite" in categories:
        for draft_dir in sorted((CORPUS / "test_suite").iterdir()):
            if not draft_dir.is_dir():
                continue
            draft = draft_dir.name.removeprefix("draft")
            for path in sorted(draft_dir.glob("*.json")):
                for index, group in enumerate(json.loads(path.read_text())):
                    valid = [t["data"] for t in group["tests"] if t["valid"]]
                    cases.append(Case(f"{draft_dir.name}/{path.stem}#{index}", "test_suite",
                                      group["schema"], draft,
                                      compact(valid[0]) if valid else None))
    for category in ("function_calling", "zod", "openapi"):
        if category not in categories:
            continue
        data = json.loads((CORPUS / category / f"{category}.json").read_text())
        for name, entry in data["schemas"].items():
            instances = entry.get("instances") or []
            document = compact(instances[0]) if instances else minimal_document(entry["schema"])
            cases.append(Case(f"{category}/{name}", category, entry["schema"], "2020-12",
                              document))
    if "schemastore" in categories:
        for path in sorted((CORPUS / "schemastore").glob("*.json")):
            schema = json.loads(path.read_text())
            draft = "7" if "draft-07" in str(schema.get("$schema", "")) else "2020-12"
            cases.append(Case(f"schemastore/{path.stem}", "schemastore", schema, draft,
                              minimal_document(schema)))
    return cases


def validator_for(case: Case) -> Any:
    import jsonschema
    import referencing
    import referencing.exceptions

    def refuse(uri: str) -> referencing.Resource:
        # Remote $refs are not fetched (no network; the test suite's refRemote server is absent).
        raise referencing.exceptions.NoSuchResource(ref=uri)

    default = jsonschema.Draft7Validator if case.draft == "7" else jsonschema.Draft202012Validator
    cls = jsonschema.validators.validator_for(case.schema, default=default)
    return cls(case.schema, format_checker=cls.FORMAT_CHECKER,
               registry=referencing.Registry(retrieve=refuse))


FORMAT_EXAMPLES = {
    "date-time": "2024-01-02T03:04:05Z", "date": "2024-01-02", "time": "03:04:05Z",
    "email": "a@example.com", "uri": "https://example.com", "uri-reference": "/a",
    "uuid": "123e4567-e89b-12d3-a456-426614174000", "ipv4": "192.0.2.1", "ipv6": "::1",
    "hostname": "example.com", "regex": "a+",
}


def minimal_document(schema: Any) -> str | None:
    """A small valid instance of `schema` (common keywords only), or None when the one built
    here does not validate: then the engines' mask time comes from their own samples."""
    import jsonschema

    def build(node: Any, root: Any, depth: int) -> Any:
        if not isinstance(node, dict) or depth > 12:
            return None
        if "$ref" in node and isinstance(node["$ref"], str) and node["$ref"].startswith("#"):
            target: Any = root
            for part in node["$ref"][1:].split("/")[1:]:
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
            return build(target, root, depth + 1)
        if "const" in node:
            return node["const"]
        if node.get("enum"):
            return node["enum"][0]
        for key in ("anyOf", "oneOf"):
            if node.get(key):
                return build(node[key][0], root, depth + 1)
        if node.get("allOf"):
            merged: dict[str, Any] = {}
            for part in node["allOf"]:
                if isinstance(part, dict):
                    merged.update(part)
            return build({**merged, **{k: v for k, v in node.items() if k != "allOf"}}, root,
                         depth + 1)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
        if kind is None:
            kind = "object" if "properties" in node else "array" if "items" in node else "string"
        if kind == "object":
            props = node.get("properties", {})
            return {key: build(props.get(key, {}), root, depth + 1)
                    for key in node.get("required", [])}
        if kind == "array":
            return [build(node.get("items", {}), root, depth + 1)
                    for _ in range(node.get("minItems", 0))]
        if kind in ("integer", "number"):
            low = node.get("minimum", node.get("exclusiveMinimum", 0))
            return math.floor(low) + 1 if "exclusiveMinimum" in node else math.ceil(low)
        if kind == "boolean":
            return False
        if kind == "null":
            return None
        if node.get("format") in FORMAT_EXAMPLES:
            return FORMAT_EXAMPLES[node["format"]]
        return "x" * max(1, node.get("minLength", 1))

    try:
        value = build(schema, schema, 0)
        jsonschema.validators.validator_for(schema)(schema).validate(value)
    except Exception:  # noqa: BLE001 - any failure here means "no document", not an error
        return None
    return compact(value)


# --- workers ----------------------------------------------------------------------------------


def tokenizer_json() -> Path:
    """The Gemma-4-shaped tokenizer.json (built by the fixture script the tests use)."""
    found = sorted((REPO_ROOT / ".cache" / "tokenizers").glob("gemma4_shaped-*/tokenizer.json"))
    if not found:
        raise BenchError(
            "no .cache/tokenizers/gemma4_shaped-*/tokenizer.json: build it with .venv/bin/python "
            "packages/react-native-executorch/__tests__/fixtures/make_gemma4_fixtures.py")
    return found[-1]


def find_bench(build_dir: Path) -> Path:
    found = sorted(build_dir.rglob(BENCH_TARGET))
    if not found:
        raise BenchError(
            f"{BENCH_TARGET} is not built under {build_dir}: cmake --build {build_dir} "
            f"--target {BENCH_TARGET} (or pass --build-dir)")
    return found[0]


def _sample(mask_bits: Any, short_ids: Any, rng: random.Random) -> int:
    """One allowed token: uniformly at random, most steps among single-byte tokens and EOS."""
    import numpy as np

    as_bytes = mask_bits.view(np.uint8)
    if rng.random() < SHORT_STEP_SHARE:
        short = short_ids[(as_bytes[short_ids >> 3] >> (short_ids & 7)) & 1 == 1]
        if short.size:
            return int(short[rng.randrange(short.size)])
    allowed = np.flatnonzero(np.unpackbits(as_bytes, bitorder="little"))
    return int(allowed[rng.randrange(allowed.size)]) if allowed.size else -1


class LibraryEngine:
    """XGrammar or llguidance behind one interface: compile, mask, accept."""

    def __init__(self, name: str, tokenizer_path: Path) -> None:
        self.name = name
        if name == "xgrammar":
            import xgrammar as xgr
            from transformers import PreTrainedTokenizerFast

            info = xgr.TokenizerInfo.from_huggingface(
                PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_path)),
                stop_token_ids=[EOS_ID])
            self.xgr = xgr
            self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
            self.token_bytes: list[bytes] = list(info.decoded_vocab)
            self.bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
        else:
            import llguidance
            import llguidance.numpy as lnp

            self.llg = llguidance
            self.lnp = lnp
            self.tokenizer = llguidance.LLTokenizer(str(tokenizer_path), eos_token=EOS_ID)
            self.token_bytes = [b"" if self.tokenizer.is_special_token(i)
                                else self.tokenizer.decode_bytes([i])
                                for i in range(self.tokenizer.vocab_size)]
            self.bitmask = lnp.allocate_token_bitmask(1, self.tokenizer.vocab_size)
        import numpy as np

        self.short_ids = np.array(sorted({i for i, b in enumerate(self.token_bytes) if len(b) == 1}
                                         | {EOS_ID}), dtype=np.int64)

    def compile(self, schema_text: str) -> tuple[Any, int | None]:
        """(compiled, size in bytes if the engine reports one); raises on a refusal."""
        if self.name == "xgrammar":
            compiled = self.compiler.compile_json_schema(
                schema_text, any_whitespace=False, separators=(",", ":"), strict_mode=False)
            return compiled, int(compiled.memory_size_bytes)
        grammar = self.llg.LLMatcher.grammar_from_json_schema(
            schema_text, overrides={"whitespace_flexible": False, "item_separator": ",",
                                    "key_separator": ":"})
        matcher = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return grammar, None

    def matcher(self, compiled: Any) -> Any:
        if self.name == "xgrammar":
            return self.xgr.GrammarMatcher(compiled)
        return self.llg.LLMatcher(self.tokenizer, compiled, log_level=0)

    def mask(self, matcher: Any) -> Any:
        """Fills the bitmask; returns it as int32 words (bit i of the vocabulary)."""
        if self.name == "xgrammar":
            matcher.fill_next_token_bitmask(self.bitmask)
            return self.bitmask[0].numpy()
        self.lnp.fill_next_token_bitmask(matcher, self.bitmask, 0)
        return self.bitmask[0]

    def accept(self, matcher: Any, token: int) -> bool:
        if self.name == "xgrammar":
            return bool(matcher.accept_token(token))
        return bool(matcher.consume_token(token)) and not matcher.is_error()


def library_worker(engine_name: str, samples: int, max_tokens: int, seed: int) -> None:
    """Serves cases on stdin/stdout in rne_json_mask_bench --report's line format."""
    from tokenizers import Tokenizer

    path = tokenizer_json()
    start = time.perf_counter()
    engine = LibraryEngine(engine_name, path)
    hf = Tokenizer.from_file(str(path))
    print(json.dumps({"vocab_size": len(engine.token_bytes),
                      "setup_ms": (time.perf_counter() - start) * 1000}), flush=True)
    for index, line in enumerate(sys.stdin):
        row = json.loads(line)
        out: dict[str, Any] = {"case": index}
        start = time.perf_counter()
        try:
            compiled, size = engine.compile(row["schema"])
        except Exception as error:  # noqa: BLE001 - a refusal is a result
            out["compile_us"] = (time.perf_counter() - start) * 1e6
            out["error"] = f"{type(error).__name__}: {error}"[:500]
            print(json.dumps(out), flush=True)
            continue
        out["compile_us"] = (time.perf_counter() - start) * 1e6
        out["memory_bytes"] = size
        if row.get("document") is not None:
            tokens = hf.encode(row["document"], add_special_tokens=False).ids + [EOS_ID]
            matcher = engine.matcher(compiled)
            mask_us: list[float] = []
            rejected_at = -1
            for i, token in enumerate(tokens):
                start = time.perf_counter()
                bits = engine.mask(matcher)
                mask_us.append((time.perf_counter() - start) * 1e6)
                if not (bits[token >> 5] >> (token & 31)) & 1 or not engine.accept(matcher, token):
                    rejected_at = i
                    break
            out["walk"] = {"tokens": len(tokens), "rejected_at": rejected_at, "mask_us": mask_us}
        rng = random.Random(seed + index)
        results = []
        for _ in range(samples):
            matcher = engine.matcher(compiled)
            text, mask_us, finished, error = b"", [], False, ""
            for _ in range(max_tokens):
                start = time.perf_counter()
                bits = engine.mask(matcher)
                mask_us.append((time.perf_counter() - start) * 1e6)
                token = _sample(bits, engine.short_ids, rng)
                if token < 0:
                    error = "empty mask"
                    break
                if not engine.accept(matcher, token):
                    error = f"allowed token {token} not accepted"
                    break
                if token == EOS_ID:
                    finished = True
                    break
                text += engine.token_bytes[token]
            results.append({"hex": text.hex(), "finished": finished, "error": error,
                            "mask_us": mask_us})
        out["samples"] = results
        print(json.dumps(out), flush=True)


class Worker:
    """One engine's worker process; each case under a timeout."""

    def __init__(self, command: list[str], setup_timeout: float) -> None:
        self.command = command
        self.setup_timeout = setup_timeout
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        cwd=REPO_ROOT)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.process.stdout, self.lines),
                         daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()
        header = self.read(self.setup_timeout)
        if header is None:
            raise BenchError(f"{self.command[0]} did not start: {''.join(self.stderr)[-2000:]}")
        self.header = json.loads(header)
        self.setup_rss = self._status("VmRSS")
        try:  # reset the peak so that the vocabulary's load (a transient peak) is not counted
            Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")
        except OSError:
            pass

    @staticmethod
    def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            del self.stderr[:-50]

    def _status(self, key: str) -> int:
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def read(self, timeout: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def run(self, row: dict[str, Any], timeout: float) -> tuple[dict[str, Any] | None, str]:
        """(result, "") or (None, "crash ..." / "timeout ..."); restarts the worker after either."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(row) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass
        line = self.read(timeout)
        if line is not None:
            return json.loads(line), ""
        hung = self.process.poll() is None
        self.stop()
        failure = f"timeout (>{timeout:.0f} s)" if hung else f"crash (exit {self.process.returncode}): " + \
            "".join(self.stderr)[-300:].strip()
        self.start()
        return None, failure

    def peak_rss_growth(self) -> int:
        return max(0, self._status("VmHWM") - self.setup_rss)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


# --- the run ----------------------------------------------------------------------------------


def engine_command(engine: str, build_dir: Path, samples: int, max_tokens: int,
                   seed: int) -> list[str]:
    if engine == "ours":
        return [str(find_bench(build_dir)), "--tokenizer", str(tokenizer_json()), "--cases", "-",
                "--report", "--samples", str(samples), "--max-tokens", str(max_tokens),
                "--seed", str(seed)]
    return [sys.executable, str(Path(__file__).resolve()), "worker", "--engine", engine,
            "--samples", str(samples), "--max-tokens", str(max_tokens), "--seed", str(seed)]


def judge(result: Result, sample: dict[str, Any], validator: Any) -> None:
    result.samples += 1
    if sample["error"]:
        result.invalid.append(f"engine error: {sample['error']}")
        return
    if not sample["finished"]:
        result.unfinished += 1
        return
    text = bytes.fromhex(sample["hex"])
    try:
        value = json.loads(text.decode("utf-8"))
        error = next(iter(validator.iter_errors(value)), None)
    except ValueError as parse_error:
        result.invalid.append(f"not JSON ({str(parse_error)[:60]}): {text[:60]!r}")
        return
    except Exception:  # noqa: BLE001 - jsonschema's own limits (a remote $ref): not the engine's
        result.unchecked += 1
        return
    if error is None:
        result.valid += 1
    else:
        result.invalid.append(f"{error.message[:80]} in {text[:60]!r}")


def run_engine(engine: str, cases: list[Case], options: dict[str, Any]) -> tuple[
        list[Result], dict[str, Any]]:
    command = engine_command(engine, options["build_dir"], options["samples"],
                             options["max_tokens"], options["seed"])
    results: list[Result] = []
    memory: dict[str, Any] = {}
    for category in CATEGORIES:
        chosen = [c for c in cases if c.category == category]
        if not chosen:
            continue
        worker = Worker(command, setup_timeout=600)  # a fresh worker: RSS per category
        memory.setdefault("setup_rss", worker.setup_rss)
        for number, case in enumerate(chosen, 1):
            row = {"schema": json.dumps(case.schema), "document": case.document}
            reply, failure = worker.run(row, options["timeout"])
            result = Result(case, failure=failure)
            results.append(result)
            if reply is None:
                print(f"  {engine} {case.id}: {failure}", file=sys.stderr, flush=True)
                continue
            result.compile_ms = reply["compile_us"] / 1000
            if reply.get("error"):
                result.error = reply["error"]
                continue
            result.compiled = True
            result.memory_bytes = reply.get("memory_bytes")
            walks = [reply["walk"]] if "walk" in reply else []
            if walks:
                result.walk_rejected = reply["walk"]["rejected_at"] >= 0
            walks += reply["samples"]
            for walk in walks:
                if walk["mask_us"]:
                    result.first_mask_us.append(walk["mask_us"][0])
                    result.mask_us.extend(walk["mask_us"][1:])
            validator = validator_for(case)
            for sample in reply["samples"]:
                judge(result, sample, validator)
            if number % 100 == 0:
                print(f"  {engine} {category}: {number}/{len(chosen)}", file=sys.stderr,
                      flush=True)
        memory[category] = worker.peak_rss_growth()
        worker.stop()
    return results, memory


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def refused_keyword(error: str) -> str:
    """The keyword a refusal names (ours: "keyword 'X'"), else the message's head."""
    for marker in ("keyword '", "Unimplemented keys: [\"", "unknown keyword '"):
        if marker in error:
            return error.split(marker, 1)[1].split("'")[0].split('"')[0]
    # XGrammar: "[hh:mm:ss] /path/file.cc:123: message"; llguidance: "Type: message".
    message = error.split(".cc:", 1)[1].split(":", 1)[-1] if ".cc:" in error else \
        error.split(":", 1)[-1]
    return message.strip()[:70]


def summarize(all_results: dict[str, list[Result]], memories: dict[str, dict[str, Any]]) -> str:
    lines = ["| category | engine | compiled | crash / timeout | compile ms median / p95 / max "
             "| first mask ms median | mask ms/token median / p95 | valid doc accepted "
             "| samples valid / unfinished / invalid / unchecked of N | schemas with an invalid sample "
             "| peak RSS growth MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for category in CATEGORIES:
        for engine, results in all_results.items():
            chosen = [r for r in results if r.case.category == category]
            if not chosen:
                continue
            ok = [r for r in chosen if r.compiled]
            failures = sum(1 for r in chosen if r.failure)
            compile_ms = [r.compile_ms for r in ok]
            first = [v for r in ok for v in r.first_mask_us]
            mask = [v for r in ok for v in r.mask_us]
            walked = [r for r in ok if r.walk_rejected is not None]
            accepted = sum(1 for r in walked if not r.walk_rejected)
            samples = sum(r.samples for r in ok)
            valid = sum(r.valid for r in ok)
            unfinished = sum(r.unfinished for r in ok)
            invalid = sum(len(r.invalid) for r in ok)
            unchecked = sum(r.unchecked for r in ok)
            lines.append(
                f"| {category} | {engine} | {len(ok)}/{len(chosen)} "
                f"({100 * len(ok) / len(chosen):.0f}%) | {failures} | "
                f"{statistics.median(compile_ms) if compile_ms else float('nan'):.2f} / "
                f"{pct(compile_ms, 0.95):.2f} / {max(compile_ms, default=float('nan')):.2f} | "
                f"{statistics.median(first) / 1000 if first else float('nan'):.3f} | "
                f"{statistics.median(mask) / 1000 if mask else float('nan'):.4f} / "
                f"{pct(mask, 0.95) / 1000:.4f} | {accepted}/{len(walked)} | "
                f"{valid} / {unfinished} / {invalid} / {unchecked} of {samples} | "
                f"{sum(1 for r in ok if r.invalid)} | "
                f"{memories[engine].get(category, 0) / 2**20:.0f} |")
    return "\n".join(lines)


def refusals(all_results: dict[str, list[Result]]) -> str:
    lines = []
    for engine, results in all_results.items():
        counts = Counter(refused_keyword(r.error) for r in results if r.error)
        top = ", ".join(f"{k} ({n})" for k, n in counts.most_common(15))
        lines.append(f"- {engine}: {top or 'none'}")
    return "\n".join(lines)


def problems(all_results: dict[str, list[Result]]) -> str:
    lines = []
    for engine, results in all_results.items():
        for r in results:
            if r.failure:
                lines.append(f"- {engine} {r.case.id}: {r.failure}")
            for message in r.invalid[:1]:
                lines.append(f"- {engine} {r.case.id}: invalid sample: {message}")
    return "\n".join(lines[:60] + ([f"- ... and {len(lines) - 60} more"] if len(lines) > 60
                                   else [])) or "- none"


def keyword_coverage(all_results: dict[str, list[Result]]) -> str:
    """Test suite: per file (one keyword each), the schemas each engine compiles."""
    engines = list(all_results)
    files = sorted({r.case.id.split("/")[1].split("#")[0] for r in all_results[engines[0]]
                    if r.case.category == "test_suite"})
    if not files:
        return ""
    lines = ["| test-suite file (both drafts) | " + " | ".join(engines) + " |",
             "|---|" + "---|" * len(engines)]
    for name in files:
        cells = []
        for engine in engines:
            chosen = [r for r in all_results[engine] if r.case.category == "test_suite"
                      and r.case.id.split("/")[1].split("#")[0] == name]
            cells.append(f"{sum(r.compiled for r in chosen)}/{len(chosen)}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(all_results: dict[str, list[Result]], memories: dict[str, dict[str, Any]]) -> str:
    setup = ", ".join(f"{e} {m['setup_rss'] / 2**20:.0f} MB" for e, m in memories.items())
    return (f"{summarize(all_results, memories)}\n\nRSS once the vocabulary is loaded (worker "
            f"process): {setup}. Versions: {library_versions() or 'n/a'}.\n\n"
            f"Refusals (keyword or message, count):\n{refusals(all_results)}\n\n"
            f"Compiled per test-suite file:\n\n{keyword_coverage(all_results)}\n\n"
            f"Crashes, timeouts, invalid samples (first 60):\n{problems(all_results)}\n")


def write_markdown(markdown: Path, report: str) -> None:
    text = markdown.read_text() if markdown.is_file() else ""
    begin, end = "<!-- BENCHMARK:BEGIN -->", "<!-- BENCHMARK:END -->"
    if begin not in text or end not in text:
        raise BenchError(f"{markdown} has no {begin} ... {end} markers to write between")
    head, rest = text.split(begin, 1)
    markdown.write_text(f"{head}{begin}\n{report}{end}{rest.split(end, 1)[1]}")


def library_versions() -> str:
    from importlib import metadata

    versions = []
    for name in ("xgrammar", "llguidance", "jsonschema"):
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(versions)


@click.group()
def cli() -> None:
    """Structured-output engines side by side."""


@cli.command()
@click.option("--engines", default=",".join(ENGINES), show_default=True,
              help="comma-separated: ours, xgrammar, llguidance")
@click.option("--categories", default=",".join(CATEGORIES), show_default=True)
@click.option("--limit", type=click.IntRange(1), default=None,
              help="at most this many schemas per category (a quick run)")
@click.option("--samples", type=click.IntRange(0, 20), default=2, show_default=True,
              help="random masked samples per compiled schema")
@click.option("--max-tokens", type=click.IntRange(8, 4096), default=192, show_default=True)
@click.option("--timeout", type=float, default=60.0, show_default=True,
              help="seconds per schema and engine before it counts as a hang")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--build-dir", type=click.Path(file_okay=False, path_type=Path),
              default=REPO_ROOT / "build" / "host", show_default=True,
              help=f"where {BENCH_TARGET} is built")
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path),
              help="every per-schema result as JSON")
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path),
              help="write the tables into this file between the BENCHMARK markers")
def run(engines: str, categories: str, limit: int | None, samples: int, max_tokens: int,
        timeout: float, seed: int, build_dir: Path, json_out: Path | None,
        markdown: Path | None) -> None:
    """Runs the engines over the corpus and prints the tables."""
    chosen_engines = [e for e in engines.split(",") if e]
    chosen_categories = tuple(c for c in categories.split(",") if c)
    for name in chosen_engines:
        if name not in ENGINES:
            raise BenchError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")
    for name in chosen_categories:
        if name not in CATEGORIES:
            raise BenchError(f"unknown category {name!r}; choose from {', '.join(CATEGORIES)}")
    cases = load_corpus(chosen_categories)
    if limit:
        cases = [c for category in chosen_categories
                 for c in [c for c in cases if c.category == category][:limit]]
    options = {"build_dir": build_dir, "samples": samples, "max_tokens": max_tokens,
               "timeout": timeout, "seed": seed}
    all_results: dict[str, list[Result]] = {}
    memories: dict[str, dict[str, Any]] = {}
    for engine in chosen_engines:
        start = time.perf_counter()
        all_results[engine], memories[engine] = run_engine(engine, cases, options)
        print(f"{engine}: {len(cases)} schemas in {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
    report = render(all_results, memories)
    print(report)
    if json_out:
        json_out.write_text(json.dumps(
            {"memory": memories,
             "results": {e: [{"id": r.case.id, **{k: v for k, v in vars(r).items() if k != "case"}}
                             for r in results] for e, results in all_results.items()}}))
    if markdown:
        write_markdown(markdown, report)


@cli.command()
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path),
              help="write the tables into this file between the BENCHMARK markers")
def table(results: Path, markdown: Path | None) -> None:
    """Renders the tables again from a run's --json-out (no engine runs)."""
    saved = json.loads(results.read_text())
    cases = {c.id: c for c in load_corpus(CATEGORIES)}
    all_results: dict[str, list[Result]] = {}
    for engine, rows in saved["results"].items():
        all_results[engine] = []
        for row in rows:
            if row["id"] not in cases:
                raise BenchError(f"{results}: schema {row['id']} is not in today's corpus")
            fields = {k: v for k, v in row.items() if k != "id"}
            all_results[engine].append(Result(cases[row["id"]], **fields))
    report = render(all_results, saved["memory"])
    print(report)
    if markdown:
        write_markdown(markdown, report)


@cli.command()
@click.option("--engine", type=click.Choice(["xgrammar", "llguidance"]), required=True)
@click.option("--samples", type=int, default=2)
@click.option("--max-tokens", type=int, default=192)
@click.option("--seed", type=int, default=1)
def worker(engine: str, samples: int, max_tokens: int, seed: int) -> None:
    """(internal) serves one library engine to `run` over stdin/stdout."""
    library_worker(engine, samples, max_tokens, seed)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cli()

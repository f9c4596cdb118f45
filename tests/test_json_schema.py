"""JSON-Schema-constrained generation through the real C++ runner (rne_llm --json-schema).

- a tiny random-weight Llama, which never writes JSON by itself, writes documents that parse
  and validate when sampled under the constraint (several seeds: random walks through the mask);
- the real SmolLM2 answers three schemas (nested object with enums, an array of integers, a
  yes/no answer) with JSON that parses and validates against them (jsonschema), and stops at EOS;
- with a tiny budget (24 tokens) SmolLM2's long answer is closed by the constraint into a
  document that parses and validates; a budget below the schema's shortest document is an error
  before anything is generated;
- a schema the grammar cannot guarantee, or a file that is not JSON, is an error naming it.

The unit tests of the schema compiler, the automaton and the masks are C++ (ctest
rne_grammar_tests); the benchmark is tools/benchmarks/json_schema_benchmark.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

SMALL_OBJECT = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "n": {"type": "integer"},
        "colour": {"enum": ["red", "green", None]},
        "tags": {"type": "array", "items": {"type": "null"}, "maxItems": 2},
    },
    "required": ["ok", "n", "colour"],
}

SMOLLM2_CASES = [
    (
        "Describe a fictional book as JSON.",
        {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "year": {"type": "integer"},
                "genre": {"type": "string", "enum": ["mystery", "fantasy", "science fiction"]},
                "author": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "alive": {"type": "boolean"}},
                    "required": ["name", "alive"],
                },
            },
            "required": ["title", "year", "genre", "author"],
        },
    ),
    (
        "List the first five prime numbers as a JSON array.",
        {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 5},
    ),
    (
        "Is Paris the capital of France? Answer as JSON.",
        {
            "type": "object",
            "properties": {"answer": {"enum": ["yes", "no"]}, "confidence": {"type": "number"}},
            "required": ["answer", "confidence"],
        },
    ),
]


def run_json(rne_llm: Path, *args: object) -> dict:
    done = subprocess.run([rne_llm, "--json", *map(str, args)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def write_schema(tmp_path: Path, schema: dict) -> Path:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    return path


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_random_model_writes_valid_json_under_the_constraint(
    seed, rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path
):
    schema_file = write_schema(tmp_path, SMALL_OBJECT)
    out = run_json(rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer,
                   "--raw", "--json-schema", schema_file, "--temperature", "1", "--seed", seed,
                   "--max-new-tokens", "60", "{")
    # The longest document this schema allows is under 60 bytes (one byte per token here).
    assert out["stats"]["stop_reason"] == "eos", out
    # The byte tokenizer gives every id a character, EOS (id 2, not a special token there)
    # included: the answer is the text before it.
    assert out["tokens"][-1] == 2 and out["text"].endswith("#")
    jsonschema.validate(json.loads(out["text"][:-1]), SMALL_OBJECT)


def test_without_the_constraint_the_random_model_writes_no_json(
    rne_llm, tiny_llama_fp32, byte_tokenizer
):
    # The control for the test above: the constraint, not luck, makes that output valid.
    out = run_json(rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer,
                   "--raw", "--temperature", "1", "--seed", "1", "--max-new-tokens", "40", "{")
    with pytest.raises(ValueError):
        json.loads(out["text"])


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(SMOLLM2_CASES)))
def test_smollm2_answers_parse_and_validate(case, rne_llm, smollm2_fp32, smollm2_checkpoint,
                                            tmp_path):
    prompt, schema = SMOLLM2_CASES[case]
    out = run_json(rne_llm, "--model", smollm2_fp32.pte_path,
                   "--tokenizer", smollm2_checkpoint / "tokenizer.json",
                   "--json-schema", write_schema(tmp_path, schema),
                   "--repetition-penalty", "1.2", "--max-new-tokens", "96", prompt)
    assert out["stats"]["stop_reason"] == "eos", out["text"]
    jsonschema.validate(json.loads(out["text"]), schema)


SUMMARY = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["summary"],
}


@pytest.mark.slow
def test_smollm2_answer_cut_by_a_tiny_budget_still_parses_and_validates(
    rne_llm, smollm2_fp32, smollm2_checkpoint, tmp_path
):
    out = run_json(rne_llm, "--model", smollm2_fp32.pte_path,
                   "--tokenizer", smollm2_checkpoint / "tokenizer.json",
                   "--json-schema", write_schema(tmp_path, SUMMARY), "--max-new-tokens", "24",
                   "Summarize the plot of Hamlet in detail, as JSON.")
    # The summary the model starts is longer than 24 tokens: the constraint closed it.
    assert len(out["tokens"]) == 24 and out["stats"]["stop_reason"] == "eos", out["text"]
    answer = json.loads(out["text"])
    jsonschema.validate(answer, SUMMARY)
    assert len(answer["summary"]) > 20, answer


def test_a_budget_below_the_shortest_document_is_an_error_before_generating(
    rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path
):
    # SMALL_OBJECT's shortest document, {"ok":true,"n":0,"colour":null}, is 31 bytes (+ EOS).
    done = subprocess.run([rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer",
                           byte_tokenizer, "--raw", "--json-schema",
                           write_schema(tmp_path, SMALL_OBJECT), "--max-new-tokens", "20", "{"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "needs at least 32 tokens" in done.stderr and "only 20 can be generated" in done.stderr
    assert "raise max_new_tokens" in done.stderr


def test_bad_schemas_are_errors_that_name_the_problem(
    rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path
):
    base = [rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer, "--raw"]

    def error(schema_text: str | None) -> str:
        path = tmp_path / "bad.json"
        if schema_text is None:
            path = tmp_path / "missing.json"
        else:
            path.write_text(schema_text)
        done = subprocess.run([*base, "--json-schema", path, "hi"], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 1
        return done.stderr

    unsupported = error('{"type": "object", "properties": {"a": {"type": "string", '
                        '"pattern": "^x"}}}')
    assert "'#/properties/a/pattern'" in unsupported and "not supported" in unsupported
    assert "not valid JSON" in error("{'type': 'string'}")
    assert "cannot read" in error(None)

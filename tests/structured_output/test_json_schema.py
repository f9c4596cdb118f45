"""JSON-Schema-constrained generation through the real C++ runner (rne_llm --json-schema).

- a tiny random-weight Llama, which never writes JSON by itself, writes documents that parse
  and validate when sampled under the constraint (several seeds: random walks through the mask);
- the real SmolLM2 answers three schemas (nested object with enums, an array of integers, a
  yes/no answer) with JSON that parses and validates against them (jsonschema), and stops at EOS;
- with a tiny budget (24 tokens) SmolLM2's long answer is closed by the constraint into a
  document that parses and validates; a budget below the schema's shortest document is an error
  before anything is generated;
- a schema the grammar cannot guarantee, or a file that is not JSON, is an error naming it;
  --json-strict refuses the unknown keywords and formats a lenient run ignores;
- Zod-style schemas (unions, nullables, a recursive type via $defs, allOf, bounded strings and
  integers, patterns and formats) and a generated set of random schemas over every supported
  construct: the random model's constrained outputs validate with jsonschema (2020-12, formats
  checked), every one.

The unit tests of the schema compiler, the automaton and the masks are C++ (ctest
rne_grammar_tests); the benchmark is tools/benchmarks/json_schema_benchmark.py.
"""

from __future__ import annotations

import datetime
import json
import random
import re
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

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
                        '"pattern": "^(?!x)"}}}')
    assert "'#/properties/a/pattern'" in unsupported and "offset 1: lookaround" in unsupported
    # A known assertion it cannot enforce is refused, named; an unknown keyword is ignored.
    assert "keyword '$dynamicRef'" in error('{"type": "string", "$dynamicRef": "#a"}')
    assert "not valid JSON" in error("{'type': 'string'}")
    missing = error(None)
    assert "missing.json" in missing and "no such file" in missing


def test_json_strict_refuses_what_the_lenient_run_ignores(
    rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path
):
    # OpenAPI-style annotations: `example` is no JSON Schema keyword, `int64` no format it knows.
    schema = {"type": "object", "properties": {"id": {"type": "integer", "format": "int64",
                                                      "example": 7}}, "required": ["id"]}
    base = [rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer, "--raw",
            "--json-schema", write_schema(tmp_path, schema), "--temperature", "1", "--seed", "1",
            "--max-new-tokens", "40"]
    out = run_json(*base, "{")
    assert out["stats"]["stop_reason"] == "eos", out
    jsonschema.validate(json.loads(out["text"][:-1]), schema)
    done = subprocess.run([*base, "--json-strict", "{"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, "strict generated: --json-strict did not reach the compiler"
    assert "format 'int64'" in done.stderr or "keyword 'example'" in done.stderr, done.stderr
    alone = subprocess.run([rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer",
                            byte_tokenizer, "--json-strict", "hi"], capture_output=True,
                           text=True, timeout=120)
    assert alone.returncode != 0
    assert "--json-strict applies to --json-schema" in alone.stderr


# What Zod's toJSONSchema emits for typical app types: unions and nullables as anyOf, a recursive
# type through $defs, an intersection as allOf, bounded strings and integers, patterns and formats.
ZOD_SCHEMAS: list[dict[str, Any]] = [
    {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 9999},
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "nickname": {"anyOf": [{"type": "string", "maxLength": 6}, {"type": "null"}]},
            "status": {"anyOf": [{"const": "active"}, {"const": "banned"},
                                 {"type": "integer", "exclusiveMinimum": 0}]},
            "tree": {"$ref": "#/$defs/Tree"},
        },
        # The tiny model's context is 64 tokens: the shortest document must leave room.
        "required": ["id", "name", "tree"],
        "additionalProperties": False,
        "$defs": {
            "Tree": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "maxLength": 4},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"},
                                 "maxItems": 2},
                },
                "required": ["label", "children"],
                "additionalProperties": False,
            },
        },
    },
    {
        "allOf": [
            {"type": "object", "properties": {"kind": {"enum": ["a", "b", 3, None, [1]]}},
             "required": ["kind"]},
            {"properties": {"score": {"type": "number", "minimum": -5, "maximum": 5},
                            "next": {"oneOf": [{"$ref": "#"}, {"type": "null"}]}},
             "required": ["score", "next"]},
        ],
    },
    # z.string().regex(), .email(), .datetime(), .uuid().nullable(), .date().optional()
    {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
            "email": {"type": "string", "format": "email", "maxLength": 40},
            "created": {"type": "string", "format": "date-time"},
            "uid": {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]},
            "day": {"type": "string", "format": "date"},
        },
        "required": ["code", "email", "uid"],
        "additionalProperties": False,
    },
    # Names judged by patternProperties and propertyNames (Tag is never generated).
    {
        "type": "object",
        "properties": {"x_id": {"type": "integer"}, "name": {"type": "string", "maxLength": 5},
                       "Tag": {"type": "string"}},
        "patternProperties": {"_id$": {"minimum": 1, "maximum": 9}},
        "propertyNames": {"pattern": "^[a-z_]+$"},
        "additionalProperties": {"type": "boolean"},
        "required": ["x_id"],
    },
]


def constrained_text(rne_llm: Path, model: Path, tokenizer: Path, schema_file: Path,
                     seed: int, max_new_tokens: int) -> str:
    out = run_json(rne_llm, "--model", model, "--tokenizer", tokenizer, "--raw",
                   "--json-schema", schema_file, "--temperature", "1", "--seed", seed,
                   "--max-new-tokens", max_new_tokens, "{")
    assert out["stats"]["stop_reason"] == "eos", out
    # As above: the byte tokenizer's EOS (id 2) has a character; the answer is before it.
    assert out["tokens"][-1] == 2, out
    return out["text"][:-1]


@pytest.mark.parametrize("case", range(len(ZOD_SCHEMAS)))
def test_zod_style_schemas_validate(case, rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path):
    schema = ZOD_SCHEMAS[case]
    schema_file = write_schema(tmp_path, schema)
    for seed in (1, 2, 3):
        text = constrained_text(rne_llm, tiny_llama_fp32.pte_path, byte_tokenizer, schema_file,
                                seed, 160)
        validate(schema, json.loads(text))


# The formats the grammar generates, checked with the standard library where jsonschema's own
# checker needs a package that is not installed (date-time, time, uri, hostname).
FORMAT_CHECKER = jsonschema.FormatChecker()


@FORMAT_CHECKER.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or (
        "T" in value and datetime.datetime.fromisoformat(value).tzinfo is not None)


@FORMAT_CHECKER.checks("time", raises=ValueError)
def _time(value: object) -> bool:
    return not isinstance(value, str) or datetime.time.fromisoformat(value).tzinfo is not None


@FORMAT_CHECKER.checks("hostname")
def _hostname(value: object) -> bool:
    label = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
    return not isinstance(value, str) or (
        len(value) <= 253 and all(label.fullmatch(part) for part in value.split(".")))


@FORMAT_CHECKER.checks("uri")
def _uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urllib.parse.urlsplit(value)
    return bool(parts.scheme) and bool(parts.netloc) and " " not in value


def validate(schema: dict[str, Any], instance: Any) -> None:
    """Full 2020-12 validation, formats included."""
    jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER).validate(instance)


def test_format_checker_can_fail() -> None:
    for fmt, bad in [("date-time", "2024-02-30T00:00:00Z"), ("date", "2024-02-30"),
                     ("time", "24:00:00Z"), ("uuid", "123"), ("ipv4", "1.2.3"),
                     ("hostname", "-a.b"), ("uri", "no scheme"), ("email", "nobody")]:
        with pytest.raises(jsonschema.ValidationError):
            validate({"format": fmt}, bad)


# Random schemas over the supported constructs. Strings avoid '#', the byte tokenizer's EOS.
def random_schema(rng: random.Random, depth: int, refs: bool) -> dict[str, Any]:
    scalar = ["string", "integer", "number", "boolean", "null", "enum", "const"]
    kinds = scalar + (["object", "array", "anyOf", "oneOf", "allOf"] if depth < 3 else [])
    if refs and depth > 0:
        kinds.append("ref")
    kind = rng.choice(kinds)
    if kind == "string" and rng.random() < 0.5:
        out = {"type": "string", **rng.choice(PATTERNS)}
        if rng.random() < 0.3:
            out["maxLength"] = 40
        return out
    if kind == "string":
        low = rng.choice([0, 0, 1, 3])
        out: dict[str, Any] = {"type": "string", "minLength": low}
        if rng.random() < 0.6:
            out["maxLength"] = low + rng.randrange(5)
        return out
    if kind in ("integer", "number"):
        out = {"type": kind}
        if rng.random() < 0.7:
            low = rng.randrange(-300, 300)
            out["minimum" if rng.random() < 0.5 else "exclusiveMinimum"] = low
            out["maximum"] = low + 1 + rng.randrange(0, 2000)
        return out
    if kind in ("boolean", "null"):
        return {"type": kind}
    values: list[Any] = ["red", "x y", 0, -7, 2.5, True, None, [1, "a"], {"k": [None]}]
    if kind == "enum":
        return {"enum": rng.sample(values, rng.randrange(1, 5))}
    if kind == "const":
        return {"const": rng.choice(values)}
    if kind == "object":
        names = rng.sample(["a", "bb", "c_d", "e", "ff"], rng.randrange(0, 5))
        properties = {n: random_schema(rng, depth + 1, refs) for n in names}
        return {"type": "object", "properties": properties,
                "required": [n for n in names if rng.random() < 0.6],
                "additionalProperties": rng.choice([False, True, {"type": "string"}])}
    if kind == "array":
        low = rng.randrange(0, 3)
        out = {"type": "array", "items": random_schema(rng, depth + 1, refs), "minItems": low}
        if rng.random() < 0.5:
            out["maxItems"] = low + rng.randrange(0, 3)
        return out
    if kind == "ref":
        return {"$ref": rng.choice(["#/$defs/item", "#"])} if rng.random() < 0.5 else {
            "type": "array", "items": {"$ref": "#"}, "maxItems": 2}
    if kind == "allOf":
        low = rng.randrange(-50, 50)
        return {"allOf": [{"type": "object", "properties": {"n": {"type": "integer",
                                                                  "minimum": low}},
                           "required": ["n"]},
                          {"properties": {"n": {"maximum": low + 20},
                                          "s": random_schema(rng, depth + 1, refs)}}]}
    # anyOf / oneOf: one alternative per type, so oneOf's are exclusive.
    types = rng.sample(["string", "integer", "boolean", "null", "object", "array"],
                       rng.randrange(2, 4))
    alternatives = []
    for t in types:
        alternative = random_schema(rng, depth + 1, False)
        while alternative.get("type") != t:
            alternative = {"type": t} if rng.random() < 0.3 else random_schema(rng, depth + 1,
                                                                              False)
        alternatives.append(alternative)
    return {kind: alternatives}


# Patterns and formats.
PATTERNS: list[dict[str, str]] = [
    {"pattern": r"^[a-z]+(-[a-z0-9]+)*$"}, {"pattern": r"\d{2}"}, {"pattern": r"^\w+@x\.io$"},
    {"pattern": r'^("|\\|\n|ab)+$'}, {"pattern": "^[^a-z]{2,5}$"},
    {"format": "date"}, {"format": "time"}, {"format": "date-time"}, {"format": "uuid"},
    {"format": "email"}, {"format": "ipv4"}, {"format": "ipv6"}, {"format": "hostname"},
    {"format": "date", "pattern": "^20"},
]

GENERATED = 24


@pytest.mark.parametrize("case", range(GENERATED))
def test_generated_schemas_validate(case, rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path):
    rng = random.Random(1000 + case)
    schema = random_schema(rng, 0, refs=case % 2 == 1)
    if case % 2 == 1:
        schema = {"type": "object", "properties": {"v": schema, "w": {"$ref": "#/$defs/item"}},
                  "$defs": {"item": {"anyOf": [{"type": "integer", "minimum": 3},
                                               {"type": "null"}]}}}
    jsonschema.Draft202012Validator.check_schema(schema)
    schema_file = write_schema(tmp_path, schema)
    text = constrained_text(rne_llm, tiny_llama_fp32.pte_path, byte_tokenizer, schema_file,
                            case, 240)
    validate(schema, json.loads(text))


@pytest.mark.parametrize("spec", PATTERNS + [{"format": "uri"}])
def test_pattern_and_format_strings_validate(spec, rne_llm, tiny_llama_fp32, byte_tokenizer,
                                             tmp_path):
    schema = {"type": "array", "items": {"type": "string", **spec}, "minItems": 1,
              "maxItems": 2}
    schema_file = write_schema(tmp_path, schema)
    for seed in (1, 2):
        out = run_json(rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer",
                       byte_tokenizer, "--raw", "--json-schema", schema_file, "--temperature",
                       "1", "--seed", seed, "--max-new-tokens", 200, "{")
        # '#' is the byte tokenizer's EOS: a uri never gets a fragment from it (EOS only ends a
        # complete document).
        assert out["stats"]["stop_reason"] == "eos" and out["tokens"][-1] == 2, out
        validate(schema, json.loads(out["text"][:-1]))


# Real schemas as they come (issue 61): unknown keywords, NUL characters, `not`, overlapping
# oneOf and allOf merges. Sampled through the constraint's own masks (rne_json_mask_bench
# --report over the byte tokenizer: random allowed tokens, closed within the budget) and every
# document validated with jsonschema; no model needed.
REAL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "example": {"a": 1}, "readonly": True, "_uniqueItems": True,
     "properties": {"a": {"type": "integer", "format": "int64"},
                    "b": {"type": "string", "format": "free text", "x-order": 2}},
     "required": ["a", "b"], "additionalProperties": False},
    {"type": "array", "maxItems": 3,
     "items": {"type": "string", "pattern": "^(/)?([^/\u0000]+(/)?)+$", "maxLength": 8}},
    {"type": "object", "properties": {"k\u0000": {"enum": ["a\u0000b", "c"]},
                                      "n": {"const": "\u0000"}},
     "required": ["k\u0000", "n"], "additionalProperties": False},
    {"type": "number", "multipleOf": 0.1, "minimum": -50, "maximum": 50},
    {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 3,
                                                "not": {"enum": ["a", "b", ""]}}},
    {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 5,
                                                "not": {"pattern": "[a-m]|\\d"}}},
    {"type": "array", "maxItems": 4,
     "items": {"type": "integer", "minimum": -3, "maximum": 3, "not": {"enum": [-1, 0, 1]}}},
    {"type": "array", "maxItems": 4,
     "items": {"not": {"anyOf": [{"type": "string"}, {"type": "object"}, {"maximum": 10}]}}},
    {"type": "array", "maxItems": 3,
     "items": {"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "null"}},
               "additionalProperties": False, "not": {"required": ["a", "b"]}}},
    {"type": "array", "maxItems": 3, "items": {"oneOf": [
        {"type": "string", "maxLength": 3}, {"type": "string", "pattern": "[a-f]"},
        {"enum": ["x", "y", 1]}, {"type": "integer", "minimum": 0}]}},
    {"type": "array", "maxItems": 2, "items": {
        "type": "object", "properties": {"run": {"type": "string", "maxLength": 4},
                                         "uses": {"type": "string", "maxLength": 4},
                                         "with": {"type": "object"}},
        "additionalProperties": False,
        "oneOf": [{"required": ["run"]}, {"required": ["uses"]}, {"required": ["with"]}]}},
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"type": "object", "properties": {"a": {"maxLength": 4}}, "required": ["a"],
                "additionalProperties": False}]},
    {"type": "array", "maxItems": 3, "items": {"allOf": [
        {"type": "string", "pattern": "^[a-c]", "maxLength": 6}, {"pattern": "[0-9]$"}]}},
    {"type": "array", "maxItems": 3, "items": {"allOf": [
        {"oneOf": [{"type": "string", "maxLength": 4}, {"type": "integer"}]},
        {"oneOf": [{"minLength": 2}, {"maximum": 3}]}]}},
    {"allOf": [{"properties": {"a": {"type": "integer"}, "x_id": {}}, "required": ["a", "x_id"]},
               {"type": "object", "properties": {"b": {"type": "null"}},
                "patternProperties": {"_id$": {"type": "integer", "maximum": 9}},
                "additionalProperties": {"minimum": 3}}]},
    {"type": "object", "properties": {"foo": {"type": "string", "maxLength": 3}},
     "allOf": [{"properties": {"bar": {"enum": [1, 2]}}, "required": ["bar"]}],
     "unevaluatedProperties": False},
    {"allOf": [{"properties": {"foo": {"maxLength": 3}}, "unevaluatedProperties": False}],
     "anyOf": [{"properties": {"bar": True}}, {"type": "array", "maxItems": 1}]},
    {"$defs": {"vars": {"oneOf": [{"$ref": "#/$defs/var"},
                                  {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/var"}}]},
               "var": {"oneOf": [{"type": "string", "pattern": "[^=]+=.*", "maxLength": 6},
                                 {"type": "object", "additionalProperties": False,
                                  "properties": {"secure": {"type": "string"}}}]}},
     "oneOf": [{"$ref": "#/$defs/vars"},
               {"type": "object", "additionalProperties": False,
                "properties": {"global": {"$ref": "#/$defs/vars"}}}]},
    {"type": "array", "maxItems": 2, "items": {
        "properties": {"fields": {"type": "array", "maxItems": 2, "items": {
            "properties": {"name": {"type": "string", "maxLength": 3}}, "required": ["name"]}},
            "files": {"type": "array", "maxItems": 1}, "folder": {"type": "string", "maxLength": 3}},
        "oneOf": [{"required": ["files"]}, {"required": ["folder"]}]}},
]


@pytest.fixture(scope="session")
def json_mask_bench() -> Path:
    from conftest import BUILD_DIR, _host_binary

    _host_binary("rne_json_mask_bench")  # built in the host build, in the grammar library's folder
    return BUILD_DIR / "grammar" / "rne_json_mask_bench"


def sampled_documents(bench: Path, tokenizer: Path, schemas: list[dict[str, Any]],
                      samples: int, max_tokens: int) -> list[list[bytes]]:
    """Per schema, the finished documents of `samples` masked random walks (an error if a schema
    is refused or a walk does not finish within its budget)."""
    cases = "".join(json.dumps({"schema": json.dumps(schema)}) + "\n" for schema in schemas)
    done = subprocess.run([bench, "--tokenizer", tokenizer, "--cases", "-", "--report",
                           "--samples", str(samples), "--max-tokens", str(max_tokens)],
                          input=cases, capture_output=True, text=True, timeout=600, check=True)
    rows = [json.loads(line) for line in done.stdout.splitlines()[1:]]
    assert len(rows) == len(schemas), done.stdout[-2000:]
    documents = []
    for schema, row in zip(schemas, rows, strict=True):
        assert "error" not in row, (schema, row.get("error"))
        for sample in row["samples"]:
            assert sample["finished"] and not sample["error"], (schema, sample)
        documents.append([bytes.fromhex(sample["hex"]) for sample in row["samples"]])
    return documents


def test_real_schemas_sample_only_valid_documents(json_mask_bench, byte_tokenizer):
    documents = sampled_documents(json_mask_bench, byte_tokenizer, REAL_SCHEMAS, 40, 96)
    for schema, docs in zip(REAL_SCHEMAS, documents, strict=True):
        for doc in docs:
            validate(schema, json.loads(doc))
    # The walks reach past the shortest values (else the check above would prove little).
    assert len({doc for docs in documents for doc in docs}) > 5 * len(REAL_SCHEMAS)


# Whole answers constrained by a regex (rne_llm --regex; responseFormat: { regex } in TS).
REGEXES = [
    r"(yes|no), because [a-z ]{3,20}\.",
    r"\d{4}-\d{2}-\d{2}",
    r"[A-Z][a-z]+( [a-z]+)*[.!?]",
    r'(\{"k":\d+\}\n?)+',
]


@pytest.mark.parametrize("regex", REGEXES)
def test_regex_answers_match(regex, rne_llm, tiny_llama_fp32, byte_tokenizer):
    for seed in (1, 2, 3):
        out = run_json(rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer",
                       byte_tokenizer, "--raw", "--regex", regex, "--temperature", "1",
                       "--seed", seed, "--max-new-tokens", 40, "{")
        assert out["stats"]["stop_reason"] == "eos" and out["tokens"][-1] == 2, out
        assert re.fullmatch(regex, out["text"][:-1]), out["text"]


def test_unsupported_regex_is_an_error_with_its_offset(rne_llm, tiny_llama_fp32, byte_tokenizer):
    done = subprocess.run([rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer",
                           byte_tokenizer, "--raw", "--regex", r"(a)\1", "hi"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert r"regex '(a)\1' at offset 3: backreferences are not supported" in done.stderr


# ---- Gemma 4's tool-call syntax (rne_llm --json-syntax gemma4) ----

GEMMA4_QUOTE = '<|"|>'
GEMMA4_TEMPLATE = (Path(__file__).resolve().parents[2] / "packages" / "react-native-executorch"
                   / "__tests__" / "fixtures" / "gemma4" / "gemma4.jinja")
GEMMA4_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
GEMMA4_KEY = re.compile(r"[^:{}\[\],<\"][^:{}\[\],<]*")


def dictsort_key(name: str) -> tuple[str, str]:
    """Jinja's case-insensitive dictsort, ties by the name: the order the dialect writes keys."""
    return (name.lower(), name)


class Gemma4Reader:
    """A strict reader of one value in Gemma 4's syntax: bare keys in dictsort order, raw strings
    between <|"|> (their content never holds "<|"), JSON numbers and literals, no whitespace."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def fail(self, what: str) -> ValueError:
        return ValueError(f"{what} at offset {self.at} of {self.text!r}")

    def read(self) -> Any:
        value = self.value()
        if self.at != len(self.text):
            raise self.fail("text after the value")
        return value

    def value(self) -> Any:
        text = self.text
        if text.startswith(GEMMA4_QUOTE, self.at):
            start = self.at + len(GEMMA4_QUOTE)
            end = text.find("<|", start)
            if end < 0 or not text.startswith(GEMMA4_QUOTE, end):
                raise self.fail("a string that does not end with <|\"|>")
            self.at = end + len(GEMMA4_QUOTE)
            return text[start:end]
        if text.startswith("{", self.at):
            return self.object()
        if text.startswith("[", self.at):
            self.at += 1
            items: list[Any] = []
            while not text.startswith("]", self.at):
                if items:
                    self.expect(",")
                items.append(self.value())
            self.at += 1
            return items
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, self.at):
                self.at += len(word)
                return literal
        match = GEMMA4_NUMBER.match(text, self.at)
        if match is None:
            raise self.fail("no value")
        self.at = match.end()
        return json.loads(match.group())

    def object(self) -> dict[str, Any]:
        self.at += 1
        out: dict[str, Any] = {}
        while not self.text.startswith("}", self.at):
            if out:
                self.expect(",")
            match = GEMMA4_KEY.match(self.text, self.at)
            if match is None:
                raise self.fail("no key")
            key = match.group()
            if key in out or (out and dictsort_key(key) < dictsort_key(list(out)[-1])):
                raise self.fail(f"key {key!r} out of dictsort order")
            self.at = match.end()
            self.expect(":")
            out[key] = self.value()
        self.at += 1
        return out

    def expect(self, byte: str) -> None:
        if not self.text.startswith(byte, self.at):
            raise self.fail(f"expected {byte!r}")
        self.at += 1


def render_gemma4_call(arguments: dict[str, Any]) -> str:
    """The arguments as Gemma 4's own template (Python Jinja) writes them in a tool call."""
    import jinja2

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant",
                 "tool_calls": [{"function": {"name": "f", "arguments": arguments}}]}]
    rendered = env.from_string(GEMMA4_TEMPLATE.read_text()).render(
        messages=messages, bos_token="", add_generation_prompt=False)
    start = rendered.index("<|tool_call>call:f") + len("<|tool_call>call:f")
    return rendered[start:rendered.index("<tool_call|>", start)]


def test_gemma4_reader_can_fail() -> None:
    assert Gemma4Reader('{a:<|"|>x<y<|"|>,b:[1,-2.5e3,null]}').read() == {
        "a": "x<y", "b": [1, -2500.0, None]}
    for bad in ['{"a":1}', "{b:1,a:2}", '{a:<|"|>x<|y<|"|>}', "{a: 1}", '<|"|>x', "[1,]",
                "{a:1}}", "'x'"]:
        with pytest.raises(ValueError):
            Gemma4Reader(bad).read()


# Tool-argument schemas: keys out of dictsort order and of mixed case, strings whose content
# has '<' and JSON's special characters, enums, patterns, formats, nesting, unions. Each one's
# shortest document fits the tiny model's 64-token context with room to spare.
GEMMA4_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "Town": {"type": "string", "maxLength": 12},
            "unit": {"enum": ["metric", "imperial"]},
        },
        "required": ["days", "Town"],
    },
    {
        "type": "object",
        "properties": {"opts": {"type": "object", "properties": {
            "z": {"type": "boolean"}, "A": {"type": "string", "minLength": 2}, "b": {}},
            "required": ["z", "A"]}},
        "required": ["opts"],
    },
    {
        "type": "object",
        "properties": {"tags": {"type": "array", "minItems": 1, "maxItems": 3,
                                "items": {"type": "string", "pattern": "^[a-z<\"\\\\]{1,4}$"}}},
        "required": ["tags"],
    },
    {
        "type": "object",
        "properties": {"when": {"type": "string", "format": "date"}, "note": {"type": "string"}},
        "required": ["when"],
    },
    {
        "type": "object",
        "properties": {"id": {"type": "string", "format": "uuid"}},
        "required": ["id"],
    },
    {
        "type": "object",
        "properties": {"items": {"type": "array", "maxItems": 2, "items": {
            "type": "object", "properties": {"qty": {"type": "integer", "minimum": 0,
                                                     "maximum": 99},
                                             "Name": {"type": "string"}},
            "required": ["qty", "Name"]}}},
        "required": ["items"],
    },
    {
        "$defs": {"node": {"type": "object", "properties": {
            "label": {"type": "string", "maxLength": 5},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
            "required": ["label"]}},
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/$defs/node"},
            "value": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer"},
                                {"type": "boolean"}]},
            "level": {"const": "<high>"},
        },
        "required": ["tree", "value", "level"],
    },
]


@pytest.mark.parametrize("case", range(len(GEMMA4_SCHEMAS)))
def test_gemma4_syntax_outputs_read_back_validate_and_rerender(
    case, rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path
):
    schema = GEMMA4_SCHEMAS[case]
    schema_file = write_schema(tmp_path, schema)
    for seed in (1, 2, 3, 4):
        out = run_json(rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer",
                       byte_tokenizer, "--raw", "--json-schema", schema_file, "--json-syntax",
                       "gemma4", "--temperature", "1", "--seed", seed, "--max-new-tokens", 62,
                       "{")
        assert out["stats"]["stop_reason"] == "eos", out
        assert out["tokens"][-1] == 2, out  # the byte tokenizer's EOS, '#'
        text = out["text"][:-1]
        value = Gemma4Reader(text).read()
        validate(schema, value)
        # Gemma 4's template writes these arguments back byte for byte (numbers here are
        # integers and there is no null, which Python prints differently).
        assert render_gemma4_call(value) == text


def test_gemma4_syntax_flag_errors(rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path):
    base = [rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer", byte_tokenizer, "--raw"]
    schema_file = write_schema(tmp_path, {"type": "object", "properties": {"a:b": {}}})
    done = subprocess.run([*base, "--json-schema", schema_file, "--json-syntax", "yaml", "hi"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "--json-syntax: unknown syntax 'yaml' (expected json or gemma4)" in done.stderr
    done = subprocess.run([*base, "--json-syntax", "gemma4", "hi"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "give a schema too" in done.stderr
    done = subprocess.run([*base, "--json-schema", schema_file, "--json-syntax", "gemma4", "hi"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "'#/properties/a:b'" in done.stderr and "bare key" in done.stderr

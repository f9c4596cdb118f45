"""The sampler's ranges, declared once (cpp/runner/sampler_options.yaml) and generated into the
C++ check (runner::validate) and TypeScript's (LLMModule): what the declaration says, that both
generated files say it, and that a bad declaration is refused naming the field."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rne_tools.errors import RegistryError
from rne_tools.registry import codegen
from rne_tools.registry.sampler_options import (
    SAMPLER_OPTIONS_FILE,
    load_sampler_options,
    parse_sampler_options,
)


def test_the_declared_ranges_are_the_samplers() -> None:
    options = {o.js_name: o for o in load_sampler_options()}
    assert {name: (o.range_text, o.off_text) for name, o in options.items()} == {
        "temperature": (">= 0", "0 = greedy"),
        "topK": (">= 0", "0 = off"),
        "topP": ("in (0, 1]", "1 = off"),
        "minP": ("in [0, 1)", "0 = off"),
        "repetitionPenalty": ("> 0", "1 = off"),
    }
    top_p, top_k = options["topP"], options["topK"]
    assert [top_p.admits(v) for v in (0.0, 1e-9, 1.0, 1.0 + 1e-9, math.nan)] == [False, True, True, False, False]
    assert [top_k.admits(v) for v in (-1, 0, 40, 1.5, math.inf)] == [False, True, True, False, False]


def test_both_languages_are_generated_from_every_row() -> None:
    options = load_sampler_options()
    header = codegen.generate_sampling_header(options)
    typescript = codegen.generate_sampling_typescript(options)
    for o in options:
        assert f'{{"{o.field}", ' in header and f"static_cast<double>(config.{o.field})" in header
        assert f"  {o.js_name}: {{ integer: {str(o.integer).lower()}," in typescript
        assert f"range: '{o.range_text}'" in typescript
    assert "export const SAMPLING_OFF = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1 }" in typescript
    # A toy option lands in both files, with nothing else to edit.
    toy = parse_sampler_options(
        SAMPLER_OPTIONS_FILE.read_text() + "typical_p:\n  type: number\n  exclusive_minimum: 0\n"
        "  maximum: 1\n  off_value: 1\n",
        SAMPLER_OPTIONS_FILE,
    )
    assert '{"typical_p", false, 0.0, false, 1.0, true, "in (0, 1]", "1 = off"}' in codegen.generate_sampling_header(toy)
    assert "typicalP: { integer: false, low: 0, lowInclusive: false, high: 1" in codegen.generate_sampling_typescript(toy)


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("top_q:\n  type: number\n  off_value: 2\n  maximum: 1\n", "top_q.off_value: 2 is outside the range (<= 1)"),
        ("top_q:\n  type: float\n  off_value: 0\n", "top_q.type: must be one of number, integer"),
        ("top_q:\n  type: number\n", "top_q.off_value: missing"),
        ("top_q:\n  type: number\n  off_value: 0\n  minimum: 0\n  exclusive_minimum: 0\n",
         "top_q: give minimum or exclusive_minimum, not both"),
        ("top_q:\n  type: number\n  off_value: 0\n  step: 1\n", "top_q.step: unknown key"),
        ("TopQ:\n  type: number\n  off_value: 0\n", "TopQ: not a snake_case SamplerConfig field name"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_field(row: str, problem: str) -> None:
    with pytest.raises(RegistryError) as caught:
        parse_sampler_options(row, Path("sampler_options.yaml"))
    assert f"sampler_options.yaml: {problem}" in str(caught.value)

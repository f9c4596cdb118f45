"""Gemma 4's chat syntax, declared once (model-registry/chat_formats/gemma4.yaml) and generated
for TypeScript (src/chat/formats/gemma4.generated.ts) and C++ (rne/chat/gemma4_syntax.generated.h):
both carry every declared marker, and a bad declaration is refused naming the field."""

from __future__ import annotations

import json

import pytest

from rne_tools.errors import RegistryError
from rne_tools.registry import codegen
from rne_tools.registry.chat_formats import (
    CHAT_FORMATS_DIR,
    FIELDS,
    load_chat_format,
    parse_chat_format,
)


def test_both_languages_carry_every_declared_marker() -> None:
    syntax = load_chat_format("gemma4")
    assert syntax["tool_call"]["quote"] == '<|"|>'
    assert syntax["media_placeholders"] == {"image": "<|image|>", "audio": "<|audio|>"}
    header = codegen.generate_gemma4_header(syntax)
    typescript = codegen.generate_gemma4_typescript(syntax)
    for section, keys in FIELDS.items():
        for key in keys:
            values = syntax[section][key]
            for value in values if isinstance(values, list) else [values]:
                assert json.dumps(value) in header, (section, key)
                assert codegen._ts_string(value) in typescript, (section, key)
    assert 'inline constexpr std::string_view kGemma4MediaPlaceholdersImage{"<|image|>"};' in header
    assert "    responseOpen: '<|tool_response>'," in typescript


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda d: d["tool_call"].pop("quote"), "tool_call.quote: must be a non-empty text, got None"),
        (lambda d: d["thought"].update(tokens=[]), "thought.tokens: must be a non-empty list of texts"),
        (lambda d: d["media_placeholders"].update(video="<|video|>"), "media_placeholders.video: unknown key"),
        (lambda d: d.update(roles={}), "roles: unknown section"),
        (lambda d: d.pop("thought"), "thought: missing"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_field(edit, problem: str) -> None:
    doc = load_chat_format("gemma4")
    edit(doc)
    with pytest.raises(RegistryError) as caught:
        parse_chat_format(json.dumps(doc), CHAT_FORMATS_DIR / "gemma4.yaml")
    assert f"chat_formats/gemma4.yaml: {problem}" in str(caught.value)

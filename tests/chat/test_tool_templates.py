"""Tool-calling prompts: the reference renderings of real chat templates with tools, by
transformers' `apply_chat_template(messages, tools=..., add_generation_prompt=True,
tokenize=False)`, which the jest suite (`__tests__/toolTemplates.test.ts`) compares byte for byte
with what `ChatTemplate` renders in TypeScript.

Templates (fixtures/tool_templates/*_tokenizer_config.json, each with its `_source`):
Qwen 2.5 (Hermes-style `<tool_call>` JSON) and Llama 3.2 (bare JSON calls, `ipython` results)
render tools; SmolLM2's and Gemma 3's do not (they get the SDK's fallback format), which the
fixture records as `supports_tools: false`.

This test fails when the committed expectations differ from what transformers renders now.
Regenerate them with:
    .venv/bin/python tests/chat/test_tool_templates.py --write
"""

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

FIXTURES = Path(__file__).resolve().parents[2] / "packages/react-native-executorch/__tests__/fixtures"
TOOL_FIXTURES = FIXTURES / "tool_templates"
EXPECTED = TOOL_FIXTURES / "tool_chat_expected.json"
TEMPLATES = {
    "qwen2_5": TOOL_FIXTURES / "qwen2_5_tokenizer_config.json",
    "llama3_2": TOOL_FIXTURES / "llama3_2_tokenizer_config.json",
    "smollm2": FIXTURES / "smollm2_tokenizer_config.json",
    "gemma3": FIXTURES / "gemma3_tokenizer_config.json",
}
SPECIAL_TOKENS = ("bos_token", "eos_token", "pad_token", "unk_token")
# Llama 3.x prints today's date (strftime_now) unless given one: fixed so the fixture is stable.
EXTRA = {"date_string": "23 Nov 2026"}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
CONVERT = {
    "type": "function",
    "function": {
        "name": "convert_currency",
        "description": "Convertit un montant — «€» vers une autre devise. 💱",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number", "minimum": 0},
                "to": {"type": "string"},
                "history": {"type": "array", "items": {"type": "integer"}},
                "options": {"type": "object", "properties": {"round": {"type": "boolean"}}},
            },
            "required": ["amount", "to"],
        },
    },
}


def _call(name: str, arguments: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


# (tools, messages). Every template gets every case; Llama 3.2 takes one call per message.
CASES = [
    ([WEATHER], [{"role": "user", "content": "What's the weather in Paris?"}]),
    ([WEATHER, CONVERT], [
        {"role": "system", "content": "You are a travel assistant."},
        {"role": "user", "content": "Weather in Kraków, in celsius?"},
        {"role": "assistant", "content": "", "tool_calls": [
            _call("get_weather", {"city": "Kraków", "unit": "celsius"})]},
        {"role": "tool", "content": "{\"temperature\": 3, \"sky\": \"snow ❄\"}"},
    ]),
    ([CONVERT], [
        {"role": "user", "content": "Convert 12.5 EUR to PLN."},
        {"role": "assistant", "content": "", "tool_calls": [
            _call("convert_currency", {"amount": 12.5, "to": "PLN", "history": [1, 2],
                                       "options": {"round": True}})]},
        {"role": "tool", "content": "53.10 PLN"},
        {"role": "assistant", "content": "12.5 EUR is 53.10 PLN."},
        {"role": "user", "content": "And 3 EUR?"},
    ]),
]


def _tokenizer(config: dict) -> PreTrainedTokenizerFast:
    """transformers' tokenizer class over a vocabulary of just the special tokens: rendering
    (tokenize=False) uses the template and the special tokens, not the vocabulary."""
    special = {key: config[key] for key in SPECIAL_TOKENS if config.get(key)}
    special = {key: value if isinstance(value, str) else value["content"] for key, value in special.items()}
    vocab = {token: i for i, token in enumerate(dict.fromkeys(["[UNK]", *special.values()]))}
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    return PreTrainedTokenizerFast(tokenizer_object=backend, chat_template=config["chat_template"],
                                   **special)


def _supports_tools(tokenizer: PreTrainedTokenizerFast) -> bool:
    """A template renders tools when offering one changes the prompt."""
    messages = [{"role": "user", "content": "Hi"}]
    with_tools = tokenizer.apply_chat_template(messages, tools=[WEATHER], tokenize=False,
                                               add_generation_prompt=True, **EXTRA)
    return with_tools != tokenizer.apply_chat_template(messages, tokenize=False,
                                                       add_generation_prompt=True, **EXTRA)


def expected() -> dict:
    templates = {}
    for name, path in TEMPLATES.items():
        tokenizer = _tokenizer(json.loads(path.read_text()))
        supports = _supports_tools(tokenizer)
        cases = [
            {"tools": tools, "messages": messages,
             "prompt": tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                     add_generation_prompt=True, **EXTRA)}
            for tools, messages in CASES
        ] if supports else []
        templates[name] = {"file": str(path.relative_to(FIXTURES)), "supports_tools": supports,
                           "cases": cases}
    return {
        "source": "transformers apply_chat_template(messages, tools=tools, "
                  "add_generation_prompt=True, tokenize=False, date_string=...) per template; "
                  "regenerate with tests/chat/test_tool_templates.py --write",
        "extra": EXTRA,
        "templates": templates,
    }


def _text() -> str:
    return json.dumps(expected(), indent=2, ensure_ascii=False) + "\n"


def test_committed_tool_prompts_are_what_transformers_renders() -> None:
    assert EXPECTED.is_file(), "run tests/chat/test_tool_templates.py --write"
    assert EXPECTED.read_text() == _text(), (
        f"{EXPECTED.name} differs from transformers' rendering; run "
        "tests/chat/test_tool_templates.py --write and commit the result")


def test_the_reference_templates_cover_both_paths() -> None:
    templates = expected()["templates"]
    assert templates["qwen2_5"]["supports_tools"] and templates["llama3_2"]["supports_tools"]
    assert not templates["smollm2"]["supports_tools"] and not templates["gemma3"]["supports_tools"]
    # The tool's schema reaches the prompt of a template that renders tools.
    assert '"name": "get_weather"' in templates["qwen2_5"]["cases"][0]["prompt"]


if __name__ == "__main__" and "--write" in sys.argv:
    EXPECTED.write_text(_text())

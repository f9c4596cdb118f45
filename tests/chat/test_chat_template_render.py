"""The C++ chat template renderer (rne_chat, through its CLI rne_chat_render) against
transformers' apply_chat_template, byte for byte.

- the committed Gemma 4 fixtures (36 cases made by apply_chat_template, errors included);
- real templates (Gemma 4 and its interleaved variant, SmolLM2's ChatML, Gemma 3, Qwen 2.5 and
  Llama 3.2, whose templates use tojson, strftime_now and raise_exception) on seeded generated
  conversations: random roles and turn counts, unicode and whitespace, tools with nested, enum
  and array parameters, tool calls and responses, thinking on and off, media parts;
- small templates that each exercise one Jinja feature (filters, tests, loops, macros,
  whitespace control, Python's number and repr formatting), and templates that fail;
- the corpus (tests/fixtures/chat_templates): 43 real templates of many families on 35 fixed
  conversations, against expected renders committed by its make_expected.py from transformers.

A render error must be the same kind of error as Python's, with the same message for
UndefinedError and the template's own raise_exception.

The binaries are the canonical host build's (build/host), as for rne_llm; RNE_CHAT_RENDER and
RNE_TOKENIZE name others (an engineer's own build directory).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rne_tools import cpp_tokenizer
from rne_tools.paths import PACKAGE_DIR

FIXTURES = PACKAGE_DIR / "__tests__" / "fixtures"
CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"
GEMMA4 = FIXTURES / "gemma4"
GEMMA4_SPECIALS = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
                   "unk_token": "<unk>"}

Case = dict[str, Any]


@pytest.fixture(scope="session")
def rne_chat_render() -> Path:
    override = os.environ.get("RNE_CHAT_RENDER")
    if override:
        return Path(override)
    from conftest import _host_binary

    return _host_binary("rne_chat_render")


def _config(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def _specials(config: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in config.items() if k.endswith("_token") and isinstance(v, str)}


def _templates() -> dict[str, tuple[str, dict[str, str]]]:
    """name -> (template text, special tokens as the tokenizer config declares them)."""
    out = {name: ((GEMMA4 / name).read_text(encoding="utf-8"), GEMMA4_SPECIALS)
           for name in ("gemma4.jinja", "google-gemma-4-31B-it-interleaved.jinja")}
    for name, path in [("smollm2", "smollm2_tokenizer_config.json"),
                       ("gemma3", "gemma3_tokenizer_config.json"),
                       ("qwen2_5", "tool_templates/qwen2_5_tokenizer_config.json"),
                       ("llama3_2", "tool_templates/llama3_2_tokenizer_config.json")]:
        config = _config(path)
        out[name] = (config["chat_template"], _specials(config))
    return out


TEMPLATES = _templates()


def render_cpp(binary: Path, template: str, cases: list[Case], tmp: Path) -> list[dict]:
    """Renders every case (apply_chat_template's keyword arguments) in one process."""
    (tmp / "template.jinja").write_text(template, encoding="utf-8")
    (tmp / "cases.json").write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run([binary, "--template", tmp / "template.jinja", "--input",
                           tmp / "cases.json", "--batch"], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return json.loads(done.stdout.decode("utf-8"))


def _load_corpus_maker() -> Any:
    """The corpus's make_expected.py, a script rather than a module: its python_kind is the one
    way Python's errors are named on both sides, its SPECIALS the corpus's special tokens."""
    spec = importlib.util.spec_from_file_location("make_expected", CORPUS / "make_expected.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    return maker


CORPUS_MAKER = _load_corpus_maker()


def render_python(template: str, case: Case) -> dict:
    """transformers' apply_chat_template(tokenize=False) with the case's special tokens."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    kwargs = dict(case)
    messages = kwargs.pop("messages")
    specials = {k: kwargs.pop(k) for k in list(kwargs) if k.endswith("_token")}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel({"<unk>": 0}, unk_token="<unk>")),
        chat_template=template, **specials)
    try:
        return {"prompt": tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)}
    except Exception as error:  # noqa: BLE001 - every kind is compared below
        return {"error": {"kind": CORPUS_MAKER.python_kind(error), "message": str(error)}}


def assert_same(template_name: str, cases: list[Case], ours: list[dict], theirs: list[dict]) -> None:
    assert len(ours) == len(theirs)
    for index, (case, got, want) in enumerate(zip(cases, ours, theirs, strict=True)):
        where = f"{template_name} case {index}: {json.dumps(case, ensure_ascii=False)[:400]}"
        if "prompt" in want:
            assert got == want, where
            continue
        assert "error" in got, f"{where}: Python fails with {want['error']}, C++ rendered"
        assert got["error"]["kind"] == want["error"]["kind"], f"{where}: {got} vs {want}"
        if want["error"]["kind"] in ("UndefinedError", "TemplateError"):
            assert got["error"]["message"] == want["error"]["message"], where
        assert got["error"]["line"] > 0, where  # errors name the template line


# ---- the committed Gemma 4 fixtures ----

def test_gemma4_fixtures_render_byte_identical(rne_chat_render, tmp_path):
    expected = json.loads((FIXTURES / "gemma4_chat_expected.json").read_text(encoding="utf-8"))
    checked = 0
    for name, fixture_cases in expected["templates"].items():
        cases = [{k: v for k, v in c.items() if k not in ("name", "prompt", "ids", "error")}
                 | GEMMA4_SPECIALS for c in fixture_cases]
        ours = render_cpp(rne_chat_render, (GEMMA4 / name).read_text(encoding="utf-8"), cases,
                          tmp_path)
        for case, got in zip(fixture_cases, ours, strict=True):
            if "error" in case:
                error = got.get("error")
                assert error and f"{error['kind']}: {error['message']}" == case["error"], case["name"]
            else:
                assert got.get("prompt") == case["prompt"], case["name"]
            checked += 1
    assert checked == 38


# ---- generated conversations on real templates ----

TEXTS = [
    "What is the capital of France?", "", "  padded both sides  ", "\n\tleading newline and tab",
    "trailing newlines\n\n", "Zażółć gęślą jaźń", "東京は日本の首都です。", "Здравствуйте! Ünïcödé ß",
    "emoji 👩‍💻🇵🇱 and ZWJ", "nbsp\u00a0inside\u3000ideographic", "RTL مرحبا بالعالم",
    "quotes ' \" and \\ backslash", "braces {{ not a tag }} {% neither %} {# nor #}",
    "a <|\"|>marker<|\"|> in text", "line one\nline two\r\nline three", "tabs\tand\u2028separator",
    "x" * 300, "1 + 1 = 2; 3.5 > 2", "<|channel>thought\nhmm<channel|>answer",
]
THOUGHTS = ["<|channel>thought\nLet me think.<channel|>", "  <|channel>thought\n\n<channel|>",
            "<|channel>thought\nnested <b>tags</b><channel|>\n"]
NUMBERS = [0, 1, -7, 42, 10**12, 70.5, -0.25, 3.14159, 1e-7, 2.5e20, 1 / 3]


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["str", "num", "bool", "null", "list", "dict"] if depth < 3 else
                      ["str", "num", "bool"])
    if kind == "str":
        return rng.choice(TEXTS[:16])
    if kind == "num":
        return rng.choice(NUMBERS)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "city", "Ä", "nested", "z_key", "items"]): _value(rng, depth + 1)
            for _ in range(rng.randint(0, 3))}


def _schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    kind = rng.choice(["string", "integer", "number", "boolean", "array", "object", "enum",
                       "nullable", "typelist"] if depth < 2 else ["string", "integer", "enum"])
    schema: dict[str, Any]
    if kind == "enum":
        schema = {"type": "string", "enum": rng.sample(["red", "green", "blue", "żółty"], 2)}
    elif kind == "nullable":
        schema = {"type": "integer", "nullable": True}
    elif kind == "typelist":
        schema = {"type": ["string", "null"]}
    elif kind == "array":
        schema = {"type": "array", "items": _schema(rng, depth + 1)}
    elif kind == "object":
        props = {f"p{k}": _schema(rng, depth + 1) for k in range(rng.randint(0, 3))}
        schema = {"type": "object", "properties": props}
        if props:
            schema["required"] = sorted(props)[:1]
    else:
        schema = {"type": kind}
    if rng.random() < 0.5:
        schema["description"] = rng.choice(["A value.", "Ünïcödé — «desc» ✈️", "with \"quotes\""])
    return schema


def _tool(rng: random.Random, index: int) -> dict[str, Any]:
    props = {name: _schema(rng) for name in rng.sample(["city", "unit", "when", "tags", "opts",
                                                        "zeta", "alpha"], rng.randint(0, 4))}
    params: dict[str, Any] = {"type": "object", "properties": props}
    if props and rng.random() < 0.7:
        params["required"] = sorted(props)[: rng.randint(1, len(props))]
    return {"type": "function", "function": {"name": f"tool_{index}",
                                             "description": rng.choice(TEXTS[:12]) or "Does it.",
                                             "parameters": params}}


def _content(rng: random.Random, media: bool) -> Any:
    if media and rng.random() < 0.3:
        parts: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice(["text", "text", "image", "audio", "video"])
            parts.append({"type": "text", "text": rng.choice(TEXTS)} if kind == "text"
                         else {"type": kind})
        return parts
    return rng.choice(TEXTS)


def _conversation(rng: random.Random, flavour: str) -> Case:
    """One apply_chat_template call: messages, maybe tools, switches, special tokens."""
    gemma4 = flavour == "gemma4"
    tools = [_tool(rng, k) for k in range(rng.randint(1, 3))] if rng.random() < 0.4 else None
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.5:
        messages.append({"role": rng.choice(["system", "system", "developer"] if gemma4
                                            else ["system"]),
                         "content": rng.choice(TEXTS)})
    for turn in range(rng.randint(1, 5)):
        messages.append({"role": "user", "content": _content(rng, gemma4)})
        if turn == 0 and rng.random() < 0.2:
            break
        answer: dict[str, Any] = {"role": "assistant",
                                  "content": (rng.choice(THOUGHTS) if gemma4 and rng.random() < 0.3
                                              else "") + rng.choice(TEXTS)}
        if tools and rng.random() < 0.5:
            calls = [{"type": "function",
                      "function": {"name": rng.choice(tools)["function"]["name"],
                                   "arguments": (_value(rng) if rng.random() < 0.2 else
                                                 {k: _value(rng) for k in
                                                  rng.sample(["city", "n", "list", "obj", "ü"],
                                                             rng.randint(0, 3))})}}
                     for _ in range(rng.randint(1, 3))]
            answer["tool_calls"] = calls
            if rng.random() < 0.5:
                answer["reasoning_content"] = rng.choice(TEXTS[:8])
            responses = [{"name": c["function"]["name"], "response": _value(rng)} for c in calls]
            if gemma4:
                answer["tool_responses"] = responses
                if rng.random() < 0.5:
                    answer["content"] = ""
                messages.append(answer)
            else:
                messages.append(answer)
                for response in responses:
                    content = response["response"]
                    messages.append({"role": "tool", "name": response["name"],
                                     "content": content if isinstance(content, str)
                                     else json.dumps(content, ensure_ascii=False)})
        else:
            messages.append(answer)
        if rng.random() < 0.1:
            messages[-1]["content"] = None  # dropped by transformers before rendering
    if rng.random() < 0.3 and messages[-1]["role"] == "assistant":
        messages.pop()
    case: Case = {"messages": messages, "add_generation_prompt": rng.random() < 0.7}
    if tools is not None:
        case["tools"] = tools
    if rng.random() < 0.5:
        case["enable_thinking"] = rng.random() < 0.5
    if flavour == "llama":
        case["date_string"] = "26 Jul 2024"  # instead of strftime_now: today's date would race
    return case


FLAVOURS = {"gemma4.jinja": "gemma4", "google-gemma-4-31B-it-interleaved.jinja": "gemma4",
            "smollm2": "chatml", "gemma3": "gemma3", "qwen2_5": "chatml", "llama3_2": "llama"}


def generated_cases(name: str, count: int) -> Iterator[Case]:
    rng = random.Random(f"{name}-{count}")
    for _ in range(count):
        case = _conversation(rng, FLAVOURS[name])
        yield case | TEMPLATES[name][1]


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_real_templates_on_generated_conversations(rne_chat_render, tmp_path, name):
    template = TEMPLATES[name][0]
    cases = list(generated_cases(name, 120))
    theirs = [render_python(template, c) for c in cases]
    rendered = sum("prompt" in t for t in theirs)
    assert rendered >= 60, f"only {rendered} of the generated cases render in Python"
    assert_same(name, cases, render_cpp(rne_chat_render, template, cases, tmp_path), theirs)


# ---- prompt parts: which stretches of a render are message content ----

def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)


def _contents(case: Case) -> set[str]:
    """The stripped plain strings: content of every message but the model's (its text parts
    too), and the strings inside Gemma 4's tool_responses."""
    out: set[str] = set()
    for message in case["messages"]:
        if message.get("role") not in ("assistant", "model"):
            content = message.get("content")
            out |= {text.strip() for text in ([content] if isinstance(content, str) else [
                part.get("text") for part in content or []
                if isinstance(part, dict) and part.get("type") == "text"]) if isinstance(text, str)}
        for response in message.get("tool_responses") or []:
            out |= {text.strip() for text in _leaves(response.get("response"))}
    return out


def render_parts(binary: Path, template: str, cases: list[Case], tmp: Path) -> list[dict]:
    (tmp / "template.jinja").write_text(template, encoding="utf-8")
    (tmp / "cases.json").write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run([binary, "--template", tmp / "template.jinja", "--input",
                           tmp / "cases.json", "--batch", "--parts"], capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return json.loads(done.stdout.decode("utf-8"))


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_prompt_parts_mark_exactly_the_message_content(rne_chat_render, tmp_path, name):
    cases = list(generated_cases(name, 60))
    for case, got in zip(cases, render_parts(rne_chat_render, TEMPLATES[name][0], cases, tmp_path),
                         strict=True):
        if "error" in got:
            continue
        assert "".join(part["text"] for part in got["parts"]) == got["prompt"]
        assert got["plain_spans_found"], case
        # as written, or as the template's tojson escaped it (Llama 3.2's tool results)
        contents = _contents(case)
        contents |= {json.dumps(text, ensure_ascii=False)[1:-1] for text in contents}
        for part in got["parts"]:
            if part["plain"]:
                assert part["text"] in contents, (part, case)


def _rne_tokenize() -> Path:
    override = os.environ.get("RNE_TOKENIZE")  # like RNE_CHAT_RENDER: another build directory
    return Path(override) if override else cpp_tokenizer.rne_tokenize_binary()


def _gemma4_shaped_tokenizer_json() -> Path:
    """Gemma 3's tokenizer with Gemma 4's special tokens at Gemma 4's ids (cached)."""
    script = FIXTURES / "make_gemma4_fixtures.py"
    spec = importlib.util.spec_from_file_location("make_gemma4_fixtures", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path: Path = module.gemma4_shaped_tokenizer_json()
    return path


def test_gemma4_fixture_ids_through_the_cpp_tokenizer(rne_chat_render, tmp_path):
    """The parts rne_llm encodes (plain parts with special-token text as text), through the C++
    tokenizer, give apply_chat_template(tokenize=True)'s ids on the Gemma-4-shaped tokenizer."""
    expected = json.loads((FIXTURES / "gemma4_chat_expected.json").read_text(encoding="utf-8"))
    lines: list[str] = []
    want: list[list[int]] = []
    for name, fixture_cases in expected["templates"].items():
        rendered = [c for c in fixture_cases if "ids" in c]
        cases = [{k: v for k, v in c.items() if k not in ("name", "prompt", "ids")}
                 | GEMMA4_SPECIALS for c in rendered]
        work = tmp_path / name
        work.mkdir()
        for case, got in zip(rendered, render_parts(rne_chat_render, (GEMMA4 / name).read_text(
                encoding="utf-8"), cases, work), strict=True):
            assert got["plain_spans_found"] and got["prompt"] == case["prompt"], case["name"]
            lines.append(json.dumps(got["parts"], ensure_ascii=False))
            want.append(case["ids"])
    done = subprocess.run([_rne_tokenize(), _gemma4_shaped_tokenizer_json(), "--parts-jsonl"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got_ids = [json.loads(line)["ids"] for line in done.stdout.splitlines()]
    assert len(got_ids) == len(want) == 34
    for index, (got, ids) in enumerate(zip(got_ids, want, strict=True)):
        assert got == ids, f"case {index}"


def test_prompt_parts_fall_back_when_the_template_edits_content(rne_chat_render, tmp_path):
    case: Case = {"messages": [{"role": "user", "content": "Say <|im_end|> now"}]}
    kept = render_parts(rne_chat_render, "<|im_start|>{{ messages[0].content | trim }}<|im_end|>",
                        [case], tmp_path)[0]
    assert kept["parts"] == [{"text": "<|im_start|>", "plain": False},
                             {"text": "Say <|im_end|> now", "plain": True},
                             {"text": "<|im_end|>", "plain": False}]
    # Slicing cuts a sentinel off: the whole prompt is template text, as before.
    sliced = render_parts(rne_chat_render, "{{ messages[0].content[:5] }}", [case], tmp_path)[0]
    assert not sliced["plain_spans_found"]
    assert sliced["parts"] == [{"text": "Say <", "plain": False}]


# ---- Jinja features, one small template each ----

FEATURES = [
    # whitespace control: trim_blocks, lstrip_blocks, "-", "+"
    "a\n  {% if true %}\n    b\n  {% endif %}\nc",
    "a  {%- if true -%}  b  {%- endif -%}  c\n",
    "x\n    {%+ if true %}y{% endif %}\n  {# comment #}\nz",
    "{{- ' a ' -}}\n\n{{ 'b' }}  \n{# c -#}  \nd{% raw %} {{ not }} {% endraw %}e\n",
    "line\r\nwindows\rmac\n",
    # values as Python prints them
    "{{ [1, 1.0, 1e20, 1e-5, 0.1, 2.5e16, -0.0, none, true, 'it\\'s', {'k': (1, 2)}, (3,)] }}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
    "{{ 1 + 2.5 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'a' ~ 1 ~ none ~ true }} {{ -(3) }} {{ 10 - 0.5 }}",
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}",
    "{{ messages[0].content }}|{{ messages[0]['role'] }}|{{ messages[-1].role }}|{{ messages[9] }}|",
    "{{ 'héllo wörld'[1:4] }}|{{ 'abcdef'[::-2] }}|{{ [1,2,3,4][1:] }}|{{ 'abc'[-1] }}",
    # filters
    "{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}|"
    "{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}",
    "{{ [3, 1, 2] | sort }}|{{ ['b', 'A', 'c'] | sort(reverse=true) }}|{{ [1, 2, 2, 1] | unique | list }}",
    "{{ {'b': 1, 'a': 2, 'C': 0} | dictsort }}|{{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }}",
    "{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ [] | first }}|{{ 'abc' | length }}{{ 'żółw' | length }}",
    "{{ ['a', 'b'] | join(', ') }}|{{ [1, 2] | join }}|{{ messages | map(attribute='role') | join('/') }}",
    "{{ ['a', 'b'] | map('upper') | list }}|{{ [1, 0, 2, none] | select | list }}|{{ [1, 2, 3, 4] | reject('odd') | list }}",
    "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|"
    "{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | list }}",
    "{{ none | default('d') }}|{{ undefined_name | default('d') }}|{{ '' | default('d', true) }}|{{ 0 | d(5, boolean=true) }}",
    "{{ '12' | int + 1 }}|{{ '3.7' | int }}|{{ 'x' | int(7) }}|{{ 3.99 | int }}|{{ '2.5' | float }}|{{ 5 | float }}",
    "{{ 42 | string ~ '!' }}|{{ 'a-b-c' | replace('-', '+') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ [1,2] | reverse | list }}",
    "{{ {'a': 1}.items() | list }}|{{ {'a': 1} | items | list }}|{{ {'x': 1, 'y': 2}.keys() | list }}|{{ {'x': 1}.values() | list }}",
    "{{ [1.5, 2, 3] | sum }}|{{ [3, 1, 2] | max }}|{{ [3, 1, 2] | min }}|{{ -3 | abs }}|{{ 2.5 | round }}|{{ 2.567 | round(2) }}",
    "{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'x y  z' | wordcount }}|{{ '<a href=\"x\">' | e }}",
    "{{ '%s and %d' | format('a', 3) }}|{{ '{} {name}'.format(1, name='n') }}|{{ 'x%sy' % 'Z' }}",
    # tojson as transformers defines it
    "{{ {'b': [1, 2.5, none, true], 'a': 'é\"\\n', 'c': {}} | tojson }}",
    "{{ {'b': [1, {'x': []}], 'a': 'ü'} | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}",
    "{{ ['ü', '😀'] | tojson(ensure_ascii=true) }}|{{ {'a': 1} | tojson(separators=(',', ':')) }}|{{ tools | tojson(indent=4) }}",
    # tests
    "{% for v in [none, true, 1, 1.5, 'x', [1], {'a': 1}, undefined_name] %}"
    "{{ v is none }}{{ v is boolean }}{{ v is integer }}{{ v is float }}{{ v is number }}{{ v is string }}"
    "{{ v is sequence }}{{ v is mapping }}{{ v is iterable }}{{ v is defined }};{% endfor %}",
    "{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby(3) }}{{ 'a' is in 'cat' }}{{ 2 is in [1, 2] }}"
    "{{ 'abc' is lower }}{{ 'AB' is upper }}{{ 1 is eq 1 }}{{ 1 is ne 1 }}{{ 3 is gt 2 }}{{ 3 is le 2 }}{{ true is true }}",
    "{{ 'a' in 'cat' }}{{ 'z' not in 'cat' }}{{ 'role' in messages[0] }}{{ 1 in [1] }}{{ not 0 }}{{ 1 and 'x' }}{{ 0 or 'y' }}",
    # string methods
    "{{ '  pad  '.strip() }}|{{ 'xxhixx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|"
    "{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}",
    "{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}{{ 'abc'.upper() }}{{ 'ÀÉÎ'.lower() }}"
    "{{ 'straße'.upper() }}{{ 'abcabc'.replace('b', 'X', 1) }}{{ 'abc'.find('c') }}{{ 'x'.join(['1', '2']) }}",
    "{{ 'a\nb\r\nc'.splitlines() }}|{{ 'title case'.title() }}|{{ 'pre-fix'.removeprefix('pre-') }}|{{ '12'.isdigit() }}",
    # dicts
    "{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('b') }}{{ {'a': 1}.get('b', 2) }}{{ dict(x=1, y=[2]) }}{{ {'items': 5}['items'] }}",
    # loops
    "{% for m in messages %}{{ loop.index }}/{{ loop.length }}{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }},{% endfor %}",
    "{% for x in [] %}never{% else %}empty{% endfor %}|{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.index }}{% endfor %}",
    "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}|{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}",
    "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in 'héj' %}[{{ x }}]{% endfor %}{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}",
    "{% for x in [1, 2, 3] %}{{ loop.previtem | default('-') }}{{ loop.nextitem | default('-') }}{{ loop.cycle('a', 'b') }} {% endfor %}",
    "{{ range(3) | list }}{{ range(1, 10, 3) | list }}{{ range(5, 0, -2) | list }}",
    # scoping and namespaces
    "{% set y = 5 %}{% for x in [1, 2] %}{% set y = x %}[{{ y }}]{% endfor %}{{ y }}",
    "{% for x in [1, 2] %}{% if loop.first %}{% set z = 1 %}{% endif %}[{{ z }}]{% endfor %}",
    "{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.n }}{{ ns.s }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t %}  block {{ a }}  {% endset %}[{{ t }}]{% set u | trim | upper %}  x  {% endset %}[{{ u }}]",
    "{% if messages[0].role == 'system' %}{% set first = messages[0].content %}{% else %}{% set first = 'none' %}{% endif %}{{ first }}",
    # macros
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }} [{{ greet() }}]",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(10) }}",
    "{% set g = 'global' %}{% macro m() %}{{ g }}|{{ later }}{% endmacro %}{% set later = 'late' %}{{ m() }}",
    "{% filter upper %}shout {{ 'this' }}{% endfilter %}|{% generation %}gen{% endgeneration %}",
    # conditionals
    "{{ 'yes' if messages else 'no' }}|{{ 'x' if false }}|{% if a is defined %}a{% elif messages | length > 1 %}many{% else %}one{% endif %}",
    "{{ messages[0].content if messages[0].content is string else messages[0].content[0].text }}",
    "{{ add_generation_prompt }} {{ bos_token }} {{ tools is none }} {{ documents }}",
    "{{ 'The number ' ~ 3 ~ ' and ' ~ 2.0 }}|{{ 1e3 }}|{{ 12345678901234567 * 10 }}|{{ 0.1 + 0.2 }}",
    # errors
    "{{ raise_exception('Only user and assistant roles are supported!') }}",
    "{% if messages | length > 0 %}{{ raise_exception('Conversation roles must alternate ' ~ messages[0].role) }}{% endif %}",
    "{{ undefined_name.attr }}",
    "{{ messages[0].nope.deeper }}",
    "{{ 'a' + 1 }}",
    "{{ messages[0]['missing'] + 'x' }}",
    "{{ 1 / 0 }}",
    "{{ none.x.y }}",
    "{% set ns = namespace() %}{% set ns._hidden = 1 %}",
    "{% for x in 5 %}{% endfor %}",
    "{{ [].append(1) }}",
    "{% if true %}unclosed",
    "{{ 'unterminated }}",
    "{% endfor %}",
    "{{ x | no_such_filter }}",
    "{{ x is no_such_test }}",
    "{% unknown_tag %}",
    "{{ 1 + }}",
]


def test_jinja_features_match_python(rne_chat_render, tmp_path):
    case: Case = {"messages": [{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": "Hi ü"},
                               {"role": "assistant", "content": "Hello."}],
                  "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                  "add_generation_prompt": True, "bos_token": "<s>"}
    failures = []
    for index, template in enumerate(FEATURES):
        want = render_python(template, case)
        work = tmp_path / str(index)
        work.mkdir()
        got = render_cpp(rne_chat_render, template, [case], work)
        try:
            assert_same(f"feature {index}", [case], got, [want])
        except AssertionError:
            failures.append(f"{index}: {template!r}\n  python: {want}\n  c++:    {got[0]}")
    assert not failures, "\n".join(failures)


# ---- how the CLI finds a model's template, and bad input ----

def test_model_dir_lookup_prefers_chat_template_jinja(rne_chat_render, tmp_path):
    conversation = tmp_path / "in.json"
    conversation.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}],
                                        "add_generation_prompt": True}))

    def render(model_dir: Path) -> subprocess.CompletedProcess:
        return subprocess.run([rne_chat_render, "--model-dir", model_dir, "--input", conversation],
                              capture_output=True, text=True, timeout=60)

    config = {"bos_token": {"content": "<B>"}, "eos_token": "<E>",
              "chat_template": "{{ bos_token }}config:{{ messages[0].content }}"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert render(tmp_path).stdout == "<B>config:Hi"
    (tmp_path / "chat_template.jinja").write_text("{{ bos_token }}jinja:{{ messages[0].content }}"
                                                  "{{ eos_token }}\n")
    assert render(tmp_path).stdout == "<B>jinja:Hi<E>"  # one trailing newline dropped, as Jinja
    (tmp_path / "chat_template.jinja").unlink()
    config["chat_template"] = [{"name": "tool_use", "template": "tools"},
                               {"name": "default", "template": "default:{{ eos_token }}"}]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert render(tmp_path).stdout == "default:<E>"
    del config["chat_template"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    done = render(tmp_path)
    assert done.returncode == 1 and "has no chat template" in done.stderr


def test_hostile_templates_fail_with_limit_errors(rne_chat_render, tmp_path):
    """(The step limit, which takes a runaway loop seconds to reach at its default, is in the
    C++ suite with a small limit.)"""
    case: Case = {"messages": [{"role": "user", "content": "x"}]}
    hostile = {
        "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}": "deeper than",
        "{{ 'x' * 100000000 }}": "max_output_bytes",
        "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}": "deeper than",
        "{% set ns = namespace(x=none) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}"
        "{% endfor %}{{ ns.x }}": "nested deeper",
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s | length }}": "max_output_bytes",
    }
    for template, needle in hostile.items():
        got = render_cpp(rne_chat_render, template, [case], tmp_path)[0]
        assert got.get("error", {}).get("kind") in ("LimitError", "TemplateSyntaxError"), (template, got)
        assert needle in got["error"]["message"], (template, got)


# ---- the corpus: real templates of many families, expected renders made by transformers ----



def _corpus_template(entry: dict[str, Any]) -> str:
    path = PACKAGE_DIR.parents[1] / entry["file"]
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))["chat_template"]
    return path.read_text(encoding="utf-8")


def corpus_differences(binary: Path, tmp: Path) -> tuple[int, dict[tuple[str, str], str]]:
    """Renders every corpus case with the C++ engine: (renders, {(template, case): what differs})."""
    expected = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))
    sources = json.loads((CORPUS / "sources.json").read_text(encoding="utf-8"))["templates"]
    cases = [{k: v for k, v in c.items() if k != "name"} for c in expected["cases"]]
    names = [c["name"] for c in expected["cases"]]
    renders = 0
    differences: dict[tuple[str, str], str] = {}
    for entry in sources:
        (tmp / "template.jinja").write_text(_corpus_template(entry), encoding="utf-8")
        (tmp / "cases.json").write_text(json.dumps(
            [c | CORPUS_MAKER.SPECIALS[entry["specials"]] for c in cases], ensure_ascii=False),
            encoding="utf-8")
        done = subprocess.run([binary, "--template", tmp / "template.jinja", "--input",
                               tmp / "cases.json", "--batch", "--now", str(expected["now"])],
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        ours = json.loads(done.stdout.decode("utf-8"))
        for name, got, want in zip(names, ours, expected["expected"][entry["name"]], strict=True):
            renders += 1
            if "prompt" in want:
                if got != want:
                    differences[entry["name"], name] = (
                        f"C++ {got['error']['kind']}: {got['error']['message']}" if "error" in got
                        else "the text differs")
            elif "error" not in got:
                differences[entry["name"], name] = f"C++ renders; Python {want['error']['kind']}"
            elif got["error"]["kind"] != want["error"]["kind"] or (
                    want["error"]["kind"] in ("UndefinedError", "TemplateError")
                    and got["error"]["message"] != want["error"]["message"]):
                differences[entry["name"], name] = (
                    f"C++ {got['error']['kind']}: {got['error']['message']} / Python "
                    f"{want['error']['kind']}: {want['error']['message']}")
    return renders, differences


# Where the C++ engine knowingly differs from transformers, and why.
KNOWN_CORPUS_DIFFERENCES: dict[tuple[str, str], str] = {}


def test_corpus_renders_as_transformers(rne_chat_render, tmp_path):
    renders, differences = corpus_differences(rne_chat_render, tmp_path)
    same = renders - len(differences)
    print(f"\nchat template corpus: {same} / {renders} renders identical to transformers "
          f"({100 * same / renders:.1f}%)")
    unexpected = {k: v for k, v in differences.items() if k not in KNOWN_CORPUS_DIFFERENCES}
    assert not unexpected, "\n".join(f"{t} / {c}: {why}" for (t, c), why in sorted(unexpected.items()))
    fixed = set(KNOWN_CORPUS_DIFFERENCES) - set(differences)
    assert not fixed, f"these now match transformers; drop them from KNOWN_CORPUS_DIFFERENCES: {fixed}"
    assert renders >= 40 * 30

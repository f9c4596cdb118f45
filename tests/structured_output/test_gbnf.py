"""GBNF-grammar-constrained generation through the real C++ runner (rne_llm --grammar).

The tiny random-weight Llama with a byte vocabulary (as tests/structured_output/test_json_schema.py uses), which
writes noise by itself, writes sentences of each grammar when sampled under the constraint;
every output is checked by a recognizer written here, independent of the C++ matcher (a
recursive-descent parser for the non-regular grammars, Python's `re` for the regular ones).
A tight token budget still ends in a whole sentence, and a bad grammar is an error naming its
line and column. Unit tests of the parser, matcher and masks: ctest rne_gbnf_tests.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

ARITHMETIC = r"""
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= [0-9]+
"""

JSONISH = r"""
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( pair ("," ws pair)* )? "}"
pair   ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [a-z ] | "\\" ["\\n] ){0,6} "\""
number ::= "-"? ([0-9] | [1-9] [0-9]{1,3})
ws     ::= " "?
"""

LIST = r"""root ::= item ("," item){1,3}
item ::= [a-c]{2} | "x"{3,}   # two letters, or three or more x
"""
LIST_RE = r"(?:[a-c]{2}|x{3,})(?:,(?:[a-c]{2}|x{3,})){1,3}"

UNICODE = 'root ::= [α-ω]+ " " [^a-z\\u00e9]{1,2} "€"?\n'
UNICODE_RE = r"[α-ω]+ [^a-zé]{1,2}€?"


class Arithmetic:
    """A recursive-descent recognizer of ARITHMETIC, written apart from the C++ matcher."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    @classmethod
    def accepts(cls, text: str) -> bool:
        parser = cls(text)
        return parser.expr() and parser.at == len(text)

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def expr(self) -> bool:
        if not self.term():
            return False
        while self.peek() in ("+", "-") and self.peek():
            self.at += 1
            if not self.term():
                return False
        return True

    def term(self) -> bool:
        if not self.factor():
            return False
        while self.peek() in ("*", "/") and self.peek():
            self.at += 1
            if not self.factor():
                return False
        return True

    def factor(self) -> bool:
        if self.peek() == "(":
            self.at += 1
            if not self.expr() or self.peek() != ")":
                return False
            self.at += 1
            return True
        start = self.at
        while self.peek().isascii() and self.peek().isdigit() and self.peek():
            self.at += 1
        return self.at > start


def jsonish_accepts(text: str) -> bool:
    """JSON (the json module) whose strings, numbers and spacing stay inside JSONISH."""
    try:
        value = json.loads(text)
    except ValueError:
        return False

    def inside(v: object) -> bool:
        if isinstance(v, str):
            return len(v) <= 6 and re.fullmatch(r'[a-z "\\\n]*', v) is not None
        if isinstance(v, bool) or v is None:
            return True
        if isinstance(v, int):
            return -9999 <= v <= 9999
        if isinstance(v, list):
            return all(inside(x) for x in v)
        if isinstance(v, dict):
            return all(inside(k) and inside(x) for k, x in v.items())
        return False

    # At most one space in a row, and only where JSONISH's ws may stand (never inside numbers
    # or keywords, which json.loads already checks).
    outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    return inside(value) and "  " not in outside_strings and "\n" not in outside_strings


CASES: list[tuple[str, str, Callable[[str], bool]]] = [
    ("arithmetic", ARITHMETIC, Arithmetic.accepts),
    ("jsonish", JSONISH, jsonish_accepts),
    ("list", LIST, lambda text: re.fullmatch(LIST_RE, text) is not None),
    ("unicode", UNICODE, lambda text: re.fullmatch(UNICODE_RE, text) is not None),
]


def test_recognizers_can_fail() -> None:
    # Each recognizer rejects near misses, so the checks below can fail.
    assert Arithmetic.accepts("(1+2)*30") and not Arithmetic.accepts("(1+2")
    assert not Arithmetic.accepts("1+") and not Arithmetic.accepts("")
    assert jsonish_accepts('{"a b": [1, -20, "x\\n"]}')
    assert not jsonish_accepts('{"A": 1}') and not jsonish_accepts("[1,  2]")
    assert not jsonish_accepts("[12345]") and not jsonish_accepts("[1")
    assert re.fullmatch(LIST_RE, "ab,xxxx") and not re.fullmatch(LIST_RE, "ab,cc,aa,bb,ca")
    assert re.fullmatch(UNICODE_RE, "αβ X€") and not re.fullmatch(UNICODE_RE, "αβ é")


def generate(rne_llm: Path, model: Path, tokenizer: Path, grammar_file: Path, seed: int,
             max_new_tokens: int) -> dict:
    done = subprocess.run(
        [rne_llm, "--json", "--model", model, "--tokenizer", tokenizer, "--raw", "--grammar",
         grammar_file, "--temperature", "1", "--seed", str(seed), "--max-new-tokens",
         str(max_new_tokens), "{"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name,grammar,accepts", CASES, ids=[c[0] for c in CASES])
def test_grammar_answers_are_sentences(name, grammar, accepts, rne_llm, tiny_llama_fp32,
                                       byte_tokenizer, tmp_path):
    grammar_file = tmp_path / f"{name}.gbnf"
    grammar_file.write_text(grammar, encoding="utf-8")
    for seed in (1, 2, 3, 4):
        out = generate(rne_llm, tiny_llama_fp32.pte_path, byte_tokenizer, grammar_file, seed, 40)
        # The byte tokenizer writes EOS (id 2) as '#': the answer is the text before it.
        assert out["stats"]["stop_reason"] == "eos" and out["tokens"][-1] == 2, out
        assert accepts(out["text"][:-1]), out["text"]


def test_a_tight_budget_still_ends_in_a_sentence(rne_llm, tiny_llama_fp32, byte_tokenizer,
                                                 tmp_path):
    grammar_file = tmp_path / "arithmetic.gbnf"
    grammar_file.write_text(ARITHMETIC)
    for budget in (2, 3, 4, 6):
        out = generate(rne_llm, tiny_llama_fp32.pte_path, byte_tokenizer, grammar_file, 5,
                       budget)
        assert out["stats"]["stop_reason"] == "eos" and len(out["tokens"]) <= budget, out
        assert Arithmetic.accepts(out["text"][:-1]), out["text"]


@pytest.mark.parametrize(
    "grammar,message",
    [
        ('root ::= "a" x\n', "grammar line 1, column 14: rule 'x' is used but never defined"),
        ('root ::= expr\nexpr ::= expr "+" "1" | "1"\n',
         "grammar line 2, column 1: rule 'expr' is left-recursive"),
        ('root ::= [a-\n', "grammar line 1, column 10: unterminated character class"),
    ],
)
def test_bad_grammars_are_errors_with_their_position(grammar, message, rne_llm, tiny_llama_fp32,
                                                     byte_tokenizer, tmp_path):
    grammar_file = tmp_path / "bad.gbnf"
    grammar_file.write_text(grammar)
    done = subprocess.run([rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer",
                           byte_tokenizer, "--raw", "--grammar", grammar_file, "hi"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert message in done.stderr, done.stderr


def test_a_grammar_with_a_regex_is_an_error(rne_llm, tiny_llama_fp32, byte_tokenizer, tmp_path):
    grammar_file = tmp_path / "list.gbnf"
    grammar_file.write_text(LIST)
    done = subprocess.run([rne_llm, "--model", tiny_llama_fp32.pte_path, "--tokenizer",
                           byte_tokenizer, "--raw", "--grammar", grammar_file, "--regex", "a+",
                           "hi"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "give one of a JSON schema, a regex or a grammar for the answer, not several" in (
        done.stderr), done.stderr

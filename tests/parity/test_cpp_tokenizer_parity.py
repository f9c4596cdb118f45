"""The C++ tokenizer (rne_tokenize) gives the same ids and text as the HF `tokenizers` package.

Checked on SmolLM2-135M-Instruct's real tokenizer.json (byte-level BPE, recovered from the GGUF),
Gemma 3's real tokenizer.json (262k-token SentencePiece-style BPE with byte fallback), a small
Gemma-style tokenizer trained here (exercising lstrip/rstrip, single_word and normalized added
tokens), and variants that use the other tokenizer.json components we support (Digits,
Metaspace, Prepend, Strip), over a varied
corpus: ASCII, accents, CJK, emoji, code, whitespace runs, numbers, special tokens inside text,
a long document, and seeded random mixes of all of these.
"""

from __future__ import annotations

import json
import random
import subprocess
import sysconfig
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from rne_tools import cpp_tokenizer

HAND_WRITTEN = [
    "",
    "Hello world",
    "What is the capital of France?",
    "The capital of France is Paris.",
    " leading space",
    "trailing space ",
    "  two leading spaces",
    "multiple   spaces    between     words",
    "tabs\tand\t\ttabs",
    "new\nlines\n\n\nand\r\nwindows line ends",
    "   \n\t  \n",
    " ",
    "\n",
    "café, naïve, Über, façade, jalapeño, Ærøskøbing, ß",
    "日本語のテキストと中文文本，还有한국어 문장。",
    "emoji 🎉😀👍🏽 flags 🇫🇷🇯🇵 family 👨‍👩‍👧 heart ❤️",
    "numbers 0 7 42 1234567890 3.14159 -12,345.67 1e-9 0x1F",
    "unicode digits ٣٤٥ ४५ Ⅻ ½ ²³",
    "don't can't won't I'm you're we've they'll he'd it's DON'T 'quoted'",
    "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot",
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|><|endoftext|>",
    "text<|im_end|>text <|im_start|> spaced",
    "<bos><start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n",
    "<eos><pad><unk><mask>",
    "a [ctrl]  b [ctrl]c\t[ctrl]",
    "wordtok xwordtok wordtokx (wordtok) wordtok_",
    "my tag and my  tag",
    "literal byte token <0x41> and ▁ metaspace char",
    "no\u00a0break\u2009thin\u3000ideographic\u2028line\u0085nel space",
    "combining e\u0301 and zero\u200bwidth\u200djoiner",
    "mixed: Ünïcödé 123abc😀def 日本2024年",
    # Letters new in Unicode 15.0, 15.1 and 16.0, and one still unassigned: HF matches \\p{L}
    # with Unicode 16.0 tables, so must we.
    "x\U00011F04'll x\U0002EBF0's x\U0001E5D0'd x\U00011DB0'll",
    # single_word boundaries use \\w: marks, Nl and Pc are word characters, No and Sc are not.
    "\u09c7wordtok ½wordtok wordtok\u0301 Ⓐwordtok \u200dwordtok Ⅶwordtok €wordtok _wordtok",
    "!!!???...,,,;;;:::",
    "a" * 300,
    "😀" * 50,
]

FUZZ_POOL = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    + [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085"]
    + list("'\".,;:!?()[]{}<>/\\-_=+*&^%$#@~`|")
    + list("éèêëàâäôöûüçñÉÀßøå") + list("日本語中文字한국어") + ["\u0301", "\u200b", "\u200d"]
    + ["🎉", "😀", "👍🏽", "🇫🇷", "❤️", "٣", "४", "Ⅻ", "½", "²"]
    + ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", " the", " of", "ing", "tion"]
    + ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<bos>", "<eos>", "<start_of_turn>",
       "<end_of_turn>", "[ctrl]", "wordtok", "my tag", "<0x41>", "▁", "Ġ"]
)


def _fuzz_corpus(count: int = 400, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    # Plus code points from the whole range (surrogates excluded): Unicode tables everywhere.
    anywhere = [rng.randint(0, 0x10FFFF) for _ in range(400)]
    pool = FUZZ_POOL + [chr(c) for c in anywhere if not 0xD800 <= c < 0xE000]
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(count)]


def _long_document() -> str:
    """A ~40 KB real file as one text: Gemma-style tokenizers see it as a single BPE word."""
    return (Path(sysconfig.get_paths()["stdlib"]) / "json" / "decoder.py").read_text()[:40000]


CORPUS = HAND_WRITTEN + _fuzz_corpus() + [_long_document()]


def _with(base: Path, out: Path, **sections: object) -> Path:
    config = json.loads(base.read_text())
    config.update(sections)
    out.write_text(json.dumps(config, ensure_ascii=False))
    return out


@pytest.fixture(scope="module")
def binary() -> Path:
    return cpp_tokenizer.rne_tokenize_binary()


@pytest.fixture(scope="module")
def tokenizer_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("tokenizers")
    smollm2 = cpp_tokenizer.smollm2_tokenizer_json()
    gemma = cpp_tokenizer.gemma_style_tokenizer_json()
    byte_level = json.loads(smollm2.read_text())["pre_tokenizer"]
    files = {
        "smollm2": smollm2,
        # The other common byte-level form: a Digits split before the GPT-2 regex.
        "smollm2_digits": _with(smollm2, tmp / "smollm2_digits.json", pre_tokenizer={
            "type": "Sequence",
            "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level],
        }),
        "gemma3": cpp_tokenizer.gemma3_tokenizer_json(),
        "gemma_style": gemma,
        # Llama-2 style SentencePiece conversion: prepend ▁, no pre-tokenizer, strip on decode.
        "llama2_style": _with(
            gemma, tmp / "llama2_style.json",
            normalizer={"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
            ]},
            pre_tokenizer=None,
            decoder={"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ]},
        ),
        # Newer SentencePiece conversions: Metaspace pre-tokenizer and decoder.
        "metaspace_style": _with(
            gemma, tmp / "metaspace_style.json",
            normalizer=None,
            pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                           "split": True},
            decoder={"type": "Sequence", "decoders": [
                {"type": "ByteFallback"},
                {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                 "split": True},
            ]},
        ),
    }
    return files


VARIANTS = ["smollm2", "smollm2_digits", "gemma3", "gemma_style", "llama2_style", "metaspace_style"]


@pytest.fixture(scope="module")
def hf(tokenizer_files: dict[str, Path]) -> dict[str, Tokenizer]:
    """HF tokenizers, loaded once per module (Gemma 3's takes seconds)."""
    return {name: Tokenizer.from_file(str(path)) for name, path in tokenizer_files.items()}


@pytest.fixture(scope="module")
def results(binary: Path, tokenizer_files: dict[str, Path]) -> dict[str, list[dict]]:
    return {
        name: cpp_tokenizer.encode_with_cpp(binary, path, CORPUS)
        for name, path in tokenizer_files.items()
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_ids_match_hf(variant, hf, results):
    mismatches = []
    for text, row in zip(CORPUS, results[variant], strict=True):
        expected = hf[variant].encode(text).ids
        expected_plain = hf[variant].encode(text, add_special_tokens=False).ids
        if row["ids"] != expected or row["ids_no_special"] != expected_plain:
            mismatches.append((text[:80], row["ids"][:40], expected[:40]))
    assert not mismatches, f"{len(mismatches)}/{len(CORPUS)} texts differ, e.g. {mismatches[:3]}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_ids_with_special_tokens_as_text_match_hf(variant, tokenizer_files, results):
    """SpecialTokens::kAsText is HF's encode_special_tokens (transformers' split_special_tokens)."""
    reference = Tokenizer.from_file(str(tokenizer_files[variant]))
    reference.encode_special_tokens = True
    mismatches = [
        (text[:80], row["ids_as_text"][:40], expected[:40])
        for text, row in zip(CORPUS, results[variant], strict=True)
        if row["ids_as_text"] != (expected := reference.encode(text, add_special_tokens=False).ids)
    ]
    assert not mismatches, f"{len(mismatches)}/{len(CORPUS)} texts differ, e.g. {mismatches[:3]}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_decode_matches_hf(variant, hf, results):
    for text, row in zip(CORPUS, results[variant], strict=True):
        ids = row["ids"]
        assert row["decoded"] == hf[variant].decode(ids, skip_special_tokens=False), text[:80]
        assert row["decoded_skip_special"] == hf[variant].decode(ids, skip_special_tokens=True), \
            text[:80]
        # The streaming decoder's pieces, joined, are the same text.
        assert row["stream"] == row["decoded"], text[:80]


@pytest.mark.parametrize("variant", VARIANTS)
def test_decode_of_arbitrary_ids_matches_hf(variant, binary, tokenizer_files, hf):
    """Decoding what a model may generate, not just what encode produced: random ids, byte
    tokens cut mid-character, special tokens anywhere, unknown ids."""
    reference = hf[variant]
    size = reference.get_vocab_size(with_added_tokens=True)
    byte_ids = [i for i in (reference.token_to_id(f"<0x{b:02X}>") for b in range(256)) if i]
    special = list(reference.get_added_tokens_decoder())
    rng = random.Random(99)
    pools = [list(range(size)), byte_ids or list(range(size)), special, [size, size + 7]]
    id_lists = [
        [rng.choice(rng.choices(pools, weights=[6, 3, 1, 0.2])[0]) for _ in range(rng.randint(1, 30))]
        for _ in range(400)
    ]
    rows = cpp_tokenizer.decode_with_cpp(binary, tokenizer_files[variant], id_lists)
    for ids, row in zip(id_lists, rows, strict=True):
        assert row["decoded"] == reference.decode(ids, skip_special_tokens=False), ids
        assert row["decoded_skip_special"] == reference.decode(ids, skip_special_tokens=True), ids


def _gpt2_byte_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character map (the alphabet of byte-level BPE)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    shifted = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + i) for i, b in enumerate(shifted)}}


def test_smollm2_round_trips_text(hf, results):
    """Byte-level BPE is lossless, special tokens included: decode(encode(text)) == text. Except
    where SmolLM2's vocab lacks a byte's token (a few control bytes and the lead bytes of
    planes 4-11): HF drops those bytes, and so do we."""
    vocab = hf["smollm2"].get_vocab()
    missing = {b for b, c in _gpt2_byte_chars().items() if c not in vocab}
    assert missing == {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)}
    checked = 0
    for text, row in zip(CORPUS, results["smollm2"], strict=True):
        if missing.isdisjoint(text.encode()):
            assert row["decoded"] == text
            checked += 1
    # Every hand-written text qualifies; random code points often land in planes 4-11.
    assert checked > len(HAND_WRITTEN)


def test_gemma_style_round_trips_text(results):
    """Byte fallback makes SentencePiece-style BPE lossless too, except by design for a literal
    "▁" (it stands for a space) and the spaces an lstrip/rstrip token swallows."""
    checked = 0
    for text, row in zip(CORPUS, results["gemma_style"], strict=True):
        if "[ctrl]" in text or "▁" in text:
            continue
        assert row["ids"][0] == 2 and row["ids"][1:] == row["ids_no_special"]  # <bos> template
        assert row["decoded_skip_special"] == text.replace("<bos>", "").replace("<eos>", "") \
            .replace("<pad>", "").replace("<unk>", "").replace("<mask>", "") \
            .replace("<start_of_turn>", "").replace("<end_of_turn>", "")
        checked += 1
    assert checked > len(CORPUS) // 2


def test_gemma3_round_trips_text(results):
    """Gemma 3: decode(encode(text)) == text, skipping the <bos> the template adds."""
    for text, row in zip(CORPUS, results["gemma3"], strict=True):
        if "▁" in text:  # a literal ▁ decodes as the space it stands for
            continue
        assert row["ids"][:1] == [2]
        assert row["decoded"] == "<bos>" + text


def test_gemma_style_uses_byte_fallback(hf, results):
    """The corpus really exercises byte fallback (emoji are not in the trained alphabet)."""
    row = results["gemma_style"][CORPUS.index("😀" * 50)]
    tokens = [hf["gemma_style"].id_to_token(i) for i in row["ids"]]
    byte_tokens = [t for t in tokens if t.startswith("<0x")]
    assert len(byte_tokens) == 200  # 50 emoji x 4 UTF-8 bytes


@pytest.mark.parametrize("variant", ["smollm2", "gemma3", "gemma_style"])
def test_vocab_matches_hf(variant, binary, tokenizer_files, hf):
    reference = hf[variant]
    path = tokenizer_files[variant]
    out = subprocess.run([str(binary), str(path), "--vocab"], capture_output=True, check=True)
    vocab = json.loads(out.stdout)
    assert vocab["vocab_size"] == reference.get_vocab_size(with_added_tokens=True)
    assert vocab["tokens"] == [reference.id_to_token(i) for i in range(len(vocab["tokens"]))]
    assert reference.id_to_token(len(vocab["tokens"])) is None
    special = sorted(i for i, t in reference.get_added_tokens_decoder().items() if t.special)
    assert vocab["special"] == special

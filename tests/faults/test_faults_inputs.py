"""Bad inputs under fault injection: the CLI, the tokenizer, the registry and the tooling's paths.

Every input here is one a user or a damaged download can really produce, fed to the real parts:
the ``rne_llm`` and ``rne_tokenize`` binaries, a real ``.pte`` exported by our tools (then
truncated or with bytes flipped), a copy of the real registry edited into hostile shapes, and
the path checks of the publishing code. Each input is classified:

- clean error: refused, exit status 1 (or a ``RneError``), with a message naming the cause;
- handled: accepted on purpose and checked to come out right (a display name with quotes is
  legal and must be escaped in the generated TypeScript, which a real TypeScript compile proves);
- crash: killed by a signal, or a Python exception that is not one of ours;
- silent acceptance: exit status 0 / no error for input that must be refused;
- unclear: refused, but the message does not name the cause.

A module-level summary prints the counts and asserts crashes = silent acceptances = unclear = 0.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import SMOLLM2_8DA4W
from rne_tools import cpp_tokenizer, registry
from rne_tools.errors import RegistryError, RneError, UnsafePathError
from rne_tools.export import cached_export
from rne_tools.gguf_import import default_checkpoint
from rne_tools.paths import REGISTRY_DIR, REPO_ROOT, contained_path
from rne_tools.publish import plan_publish
from rne_tools.publish.errors import PublishError
from rne_tools.registry import codegen

CLEAN, HANDLED, CRASH, SILENT, UNCLEAR = "clean error", "handled", "crash", "silent", "unclear"


@dataclass
class Ledger:
    """Outcome of every bad input tried in this module."""

    outcomes: dict[str, list[str]] = field(default_factory=dict)

    def record(self, name: str, outcome: str, detail: str = "") -> str:
        self.outcomes.setdefault(outcome, []).append(f"{name}: {detail}"[:400])
        return outcome

    def count(self, outcome: str) -> int:
        return len(self.outcomes.get(outcome, []))

    @property
    def tried(self) -> int:
        return sum(len(v) for v in self.outcomes.values())


LEDGER = Ledger()
# Read before verification_memo points RNE_CACHE_DIR at a fresh directory for this module.
MACHINE_CACHE_DIR = os.environ.get("RNE_CACHE_DIR")


@pytest.fixture(scope="module", autouse=True)
def verification_memo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """rne_llm remembers verified files under RNE_CACHE_DIR: a fresh one for this module."""
    with pytest.MonkeyPatch.context() as patch:
        memo = tmp_path_factory.mktemp("rne-cache")
        patch.setenv("RNE_CACHE_DIR", str(memo))
        yield memo


@pytest.fixture(scope="module", autouse=True)
def summary(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    lines = [
        f"bad inputs tried: {LEDGER.tried}, clean errors: {LEDGER.count(CLEAN)}, "
        f"handled (accepted and verified): {LEDGER.count(HANDLED)}, crashes: "
        f"{LEDGER.count(CRASH)}, silent acceptances: {LEDGER.count(SILENT)}, unclear errors: "
        f"{LEDGER.count(UNCLEAR)}"
    ]
    for bad in (CRASH, SILENT, UNCLEAR):
        lines += [f"  {bad}: {item}" for item in LEDGER.outcomes.get(bad, [])]
    # Printed past pytest's output capture, so the summary shows in every run.
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        (reporter.write_line if reporter else print)("")
        for line in lines:
            (reporter.write_line if reporter else print)(f"[faults/inputs] {line}")
    assert LEDGER.count(CRASH) == LEDGER.count(SILENT) == LEDGER.count(UNCLEAR) == 0, lines


def cli_outcome(name: str, done: subprocess.CompletedProcess[bytes], cause: str) -> str:
    """Classifies a CLI run that must fail with a message containing ``cause``."""
    stderr = done.stderr.decode(errors="replace")
    if done.returncode < 0 or done.returncode >= 128:
        return LEDGER.record(name, CRASH, f"exit {done.returncode}: {stderr[-300:]}")
    if done.returncode == 0:
        return LEDGER.record(name, SILENT, done.stdout.decode(errors="replace")[:200])
    if cause.lower() not in stderr.lower():
        return LEDGER.record(name, UNCLEAR, f"wanted {cause!r}, got: {stderr[-300:]}")
    return LEDGER.record(name, CLEAN, stderr.strip().splitlines()[-1])


def python_outcome(name: str, action: Callable[[], Any], error: type[RneError], cause: str) -> str:
    """Classifies a call that must raise ``error`` with a message containing ``cause``."""
    try:
        result = action()
    except error as exc:
        if cause not in str(exc):
            return LEDGER.record(name, UNCLEAR, f"wanted {cause!r}, got: {exc}")
        return LEDGER.record(name, CLEAN, str(exc).strip().splitlines()[-1])
    except Exception as exc:  # anything not ours is a crash of the tooling
        return LEDGER.record(name, CRASH, f"{type(exc).__name__}: {exc}")
    return LEDGER.record(name, SILENT, repr(result)[:200])


# --- rne_llm: flags, prompts, damaged model files ------------------------------------------


@pytest.fixture(scope="module")
def tiny_pte(tiny_llama_fp32) -> Path:  # noqa: ANN001 (conftest fixture)
    return tiny_llama_fp32.pte_path


def run_llm(binary: Path, *args: str | bytes | Path, env: dict[str, str] | None = None,
            timeout: float = 60):
    return subprocess.run(
        [binary, *args], capture_output=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


BAD_FLAGS = [
    (["--max-new-tokens", "-1"], "--max-new-tokens must be >= 0"),
    (["--max-new-tokens", "99999999999"], "--max-new-tokens expects a number"),
    (["--max-new-tokens", "ten"], "--max-new-tokens expects a number"),
    (["--top-k", "-2"], "--top-k must be >= 0"),
    (["--temperature", "-1"], "temperature must be >= 0"),
    (["--temperature", "nan"], "--temperature expects a number"),
    (["--top-p", "0"], "top_p must be in (0, 1]"),
    (["--top-p", "1.5"], "top_p must be in (0, 1]"),
    (["--min-p", "1"], "min_p must be in [0, 1)"),
    (["--repetition-penalty", "0"], "repetition_penalty must be > 0"),
    (["--seed", "-1"], "--seed expects a number"),
    (["--sha256", "abc"], "--sha256 expects 64 hex digits"),
    (["--prompt-ids", "1,999999"], "outside the vocabulary"),
    (["--prompt-ids", "1,x"], "--prompt-ids expects a number"),
    (["--frobnicate"], "unknown option --frobnicate"),
    (["--speculative", "ngram"], "--speculative: unknown drafter 'ngram'"),
    (["--speculative", "prompt-lookup", "--max-draft-tokens", "-1"], "max_draft_tokens must be >= 1"),
    (["--speculative", "prompt-lookup", "--max-draft-tokens", "2.5"], "--max-draft-tokens expects a number"),
    (["--speculative", "prompt-lookup", "--ngram-min", "0"], "ngram_min must be >= 1"),
    (["--speculative", "prompt-lookup", "--ngram-min", "3", "--ngram-max", "2"],
     "ngram_max (2) must be >= ngram_min (3)"),
    (["--max-draft-tokens", "4"], "tune a speculative drafter, and none is chosen"),
]


@pytest.mark.parametrize(("flags", "cause"), BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS])
def test_out_of_range_flags_are_refused(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, flags: list[str], cause: str
) -> None:
    done = run_llm(rne_llm, "--model", tiny_pte, "--tokenizer", byte_tokenizer, "--raw", *flags, "hi")
    assert cli_outcome(f"rne_llm {' '.join(flags)}", done, cause) == CLEAN


INVALID_UTF8 = [
    ([b"a\xffb"], "the prompt is not valid UTF-8 (byte 0xFF at offset 1)"),
    ([b"caf\xc3"], "the prompt is not valid UTF-8 (byte 0xC3 at offset 3)"),  # cut character
    ([b"\xed\xa0\x80"], "the prompt is not valid UTF-8"),  # a UTF-16 surrogate as UTF-8
    ([b"--system", b"\xc0\xaf", b"hi"], "--system is not valid UTF-8"),  # overlong '/'
    ([b"--stop", b"\xfe", b"hi"], "--stop is not valid UTF-8"),
]


@pytest.mark.parametrize(("args", "cause"), INVALID_UTF8, ids=[repr(a) for a, _ in INVALID_UTF8])
def test_invalid_utf8_text_is_refused_not_dropped(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, args: list[bytes], cause: str
) -> None:
    done = run_llm(rne_llm, "--model", tiny_pte, "--tokenizer", byte_tokenizer, "--raw", *args)
    assert cli_outcome(f"rne_llm prompt {args!r}", done, cause) == CLEAN


def test_valid_text_still_runs(rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path) -> None:
    """The checks refuse only what is wrong: non-ASCII UTF-8 and --max-new-tokens 0 run."""
    done = run_llm(rne_llm, "--model", tiny_pte, "--tokenizer", byte_tokenizer, "--raw",
                   "--json", "--max-new-tokens", "0", "--stop", "é", "zażółć 漢字 🙂")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    out = json.loads(done.stdout)
    # The export's report beside the .pte supplies its sha256: verified on first use.
    assert out["prompt_ids"] and out["integrity"] in ("hashed", "remembered")


def damaged_copies(pte: Path, directory: Path) -> dict[str, Path]:
    """Real damage a download or a disk can do: truncation and flipped bytes (middle, weights)."""
    data = pte.read_bytes()
    middle = len(data) // 2
    flip = lambda offset: data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1:]  # noqa: E731
    variants = {
        "truncated to 8 bytes": data[:8],
        "truncated to 100 bytes": data[:100],
        "truncated at 50%": data[:middle],
        "truncated 1 byte short": data[:-1],
        "one byte flipped in the middle": flip(middle),
        "16 bytes inverted in the middle": data[:middle]
        + bytes(b ^ 0xFF for b in data[middle : middle + 16])
        + data[middle + 16 :],
        "one byte flipped near the end": flip(len(data) - 100),
        "one byte appended": data + b"\0",
    }
    paths = {}
    for i, (name, content) in enumerate(variants.items()):
        path = directory / f"damaged{i}.pte"
        path.write_bytes(content)
        paths[name] = path
    return paths


def test_damaged_pte_with_known_sha256_is_a_corrupt_file_error(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    """Every damaged copy fails before loading, however harmless the damage looks to the loader
    (flipped weights load and generate garbage with exit 0 when nothing checks them)."""
    sha256 = json.loads(tiny_pte.with_suffix(".report.json").read_text())["sha256"]
    env = {"RNE_CACHE_DIR": str(tmp_path / "cache")}
    for name, path in damaged_copies(tiny_pte, tmp_path).items():
        done = run_llm(rne_llm, "--model", path, "--tokenizer", byte_tokenizer, "--raw",
                       "--sha256", sha256, "--max-new-tokens", "4", "hi", env=env)
        assert cli_outcome(f"rne_llm --sha256 on a .pte {name}", done, "corrupt file") == CLEAN
        assert str(path) in done.stderr.decode()


def test_verification_is_remembered_until_the_file_changes(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    model = tmp_path / "model.pte"
    shutil.copyfile(tiny_pte, model)
    sha256 = json.loads(tiny_pte.with_suffix(".report.json").read_text())["sha256"]
    env = {"RNE_CACHE_DIR": str(tmp_path / "cache")}

    def run() -> subprocess.CompletedProcess[bytes]:
        return run_llm(rne_llm, "--model", model, "--tokenizer", byte_tokenizer, "--raw", "--json",
                       "--sha256", sha256.upper(), "--max-new-tokens", "2", "hi", env=env)

    # A file changed within the last 2 s (a timestamp tick on some filesystems) is hashed every
    # time: a second change within the same tick could keep its ctime.
    assert json.loads(run().stdout)["integrity"] == "hashed"
    assert json.loads(run().stdout)["integrity"] == "hashed"
    time.sleep(2.1)
    assert json.loads(run().stdout)["integrity"] == "hashed"
    assert json.loads(run().stdout)["integrity"] == "remembered"
    # Damage in place after a remembered success (same path, same size): hashed again, refused.
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0x01
    with model.open("r+b") as f:
        f.write(data)
    stat = tiny_pte.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the mtime put back
    assert cli_outcome("rne_llm --sha256 after in-place damage", run(), "corrupt file") == CLEAN


def test_exporter_report_next_to_the_pte_supplies_the_checksum(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    """An export copied with its .report.json is verified without --sha256."""
    env = {"RNE_CACHE_DIR": str(tmp_path / "cache")}
    report = tiny_pte.with_suffix(".report.json")
    for name, path in damaged_copies(tiny_pte, tmp_path).items():
        renamed = path.parent / tiny_pte.name
        path.replace(renamed)
        shutil.copyfile(report, renamed.with_suffix(".report.json"))
        done = run_llm(rne_llm, "--model", renamed, "--tokenizer", byte_tokenizer, "--raw",
                       "--max-new-tokens", "2", "hi", env=env)
        assert cli_outcome(f"rne_llm, report beside a .pte {name}", done, "corrupt file") == CLEAN
    shutil.copyfile(tiny_pte, tmp_path / tiny_pte.name)
    done = run_llm(rne_llm, "--model", tmp_path / tiny_pte.name, "--tokenizer", byte_tokenizer,
                   "--raw", "--json", "--max-new-tokens", "2", "hi", env=env)
    assert done.returncode == 0 and json.loads(done.stdout)["integrity"] == "hashed"


def test_truncated_pte_without_checksum_is_a_corrupt_file_error(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    """With no checksum known the loader is the last line: truncation must still be caught."""
    damaged = damaged_copies(tiny_pte, tmp_path)
    for name in [n for n in damaged if n.startswith("truncated")]:
        done = run_llm(rne_llm, "--model", damaged[name], "--tokenizer", byte_tokenizer, "--raw",
                       "--max-new-tokens", "2", "hi")
        assert cli_outcome(f"rne_llm on a .pte {name}", done, "corrupt file") == CLEAN


# Seeded, so a failure names offsets that reproduce; about 30 ms a run on the tiny program
# (30 s for the whole test on a shared 2-core machine).
FLIP_CASES = 1000
FLIP_SEED = 39


def test_flipped_program_bytes_without_checksum_never_crash(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Flips bits of one byte at FLIP_CASES seeded offsets across the FlatBuffer program (which
    ends at program_size, stored in the extended header: values, instructions, operators,
    delegates, segment tables) and loads each copy with no checksum known. ExecuTorch 1.5.1
    aborts on some programs that pass FlatBuffer verification (an output past the values table,
    an operator index past the operators, a kernel argument of the wrong type, a delegate called
    with too few arguments); the runner's program check must refuse them first.
    A run that exits 0 used a byte nothing can check without a checksum (a name, a padding
    byte, a constant's value): it is counted, not failed."""
    data = tiny_pte.read_bytes()
    program_size = int.from_bytes(data[16:24], "little")
    rng = random.Random(FLIP_SEED)
    offsets = sorted(rng.sample(range(24, program_size), min(FLIP_CASES, program_size - 24)))
    path = tmp_path / "flipped.pte"
    tally: dict[str, list[int]] = {}
    for offset in offsets:
        mask = rng.randrange(1, 256)
        path.write_bytes(data[:offset] + bytes([data[offset] ^ mask]) + data[offset + 1 :])
        name = f"rne_llm on a .pte with byte {offset} ^ 0x{mask:02x} (program of {program_size})"
        try:
            done = run_llm(rne_llm, "--model", path, "--tokenizer", byte_tokenizer, "--raw",
                           "--max-new-tokens", "2", "hi", timeout=30)
        except subprocess.TimeoutExpired:
            tally.setdefault(LEDGER.record(name, CRASH, "hung for 30 s"), []).append(offset)
            continue
        if done.returncode == 0:
            tally.setdefault("ran", []).append(offset)
        else:
            tally.setdefault(cli_outcome(name, done, "corrupt file"), []).append(offset)
    counts = {k: len(v) for k, v in sorted(tally.items())}
    with capsys.disabled():
        print(f"\n[faults/inputs] flipped program bytes (no checksum): {len(offsets)} tried, "
              f"{counts.get(CLEAN, 0)} clean errors, {counts.get('ran', 0)} ran (a byte nothing "
              f"checks without a checksum), {counts.get(CRASH, 0)} crashes, "
              f"{counts.get(UNCLEAR, 0)} unclear")
    assert counts.get(CLEAN, 0) > len(offsets) // 2, f"too few flips caught: {counts}"
    assert CRASH not in tally, f"crashed at offsets {tally[CRASH]}"
    assert UNCLEAR not in tally, f"unclear errors at offsets {tally[UNCLEAR]}"


def test_missing_and_foreign_model_files(rne_llm: Path, byte_tokenizer: Path, tmp_path: Path) -> None:
    cases = {
        "a missing .pte": (tmp_path / "nope.pte", "no such file"),
        "a tokenizer.json as the model": (byte_tokenizer, "not an ExecuTorch program"),
        "an empty file": (tmp_path / "empty.pte", "not an ExecuTorch program"),
    }
    (tmp_path / "empty.pte").write_bytes(b"")
    for name, (model, cause) in cases.items():
        done = run_llm(rne_llm, "--model", model, "--tokenizer", byte_tokenizer, "--raw", "hi")
        assert cli_outcome(f"rne_llm with {name}", done, cause) == CLEAN


# --- model loading: hostile files in every path, reports, races, damage, tokenizer chains --
#
# Generated cases for the loader's fault classes (#39): whatever a path names, rne_llm ends with
# a clean error or a verified run, never a hang, a crash or an unchecked run that says nothing.

HANG_TIMEOUT_S = 15.0  # a run of the tiny model takes well under a second
SOCKETS: list[socket.socket] = []


def run_bounded(binary: Path, *args: str | Path, env: dict[str, str] | None = None,
                ) -> subprocess.CompletedProcess[bytes] | None:
    """``run_llm`` that returns None for a run that had to be killed (a hang)."""
    try:
        return run_llm(binary, *args, env=env, timeout=HANG_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None


def bounded_outcome(name: str, done: subprocess.CompletedProcess[bytes] | None,
                    causes: tuple[str, ...]) -> str:
    """``cli_outcome`` for a run that may have hung, with any of several causes accepted."""
    if done is None:
        return LEDGER.record(name, CRASH, f"hung: killed after {HANG_TIMEOUT_S:.0f} s")
    stderr = done.stderr.decode(errors="replace").lower()
    cause = next((c for c in causes if c.lower() in stderr), causes[0])
    return cli_outcome(name, done, cause)


def _bind_socket(path: Path) -> None:
    # Bound at a short path (AF_UNIX paths are short), then moved into place.
    short = Path(tempfile.mkdtemp(prefix="rne-")) / "s"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(short))
    SOCKETS.append(sock)
    short.replace(path)
    short.parent.rmdir()


# Each kind of non-regular file, and what the error must call it.
SPECIAL_FILES: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "a FIFO": (os.mkfifo, ("FIFO",)),
    "a directory": (lambda p: p.mkdir(), ("directory",)),
    "a link to /dev/zero": (lambda p: p.symlink_to("/dev/zero"), ("character device",)),
    "a link to /dev/urandom": (lambda p: p.symlink_to("/dev/urandom"), ("character device",)),
    "a dangling link": (lambda p: p.symlink_to(p.parent / "nowhere"),
                        ("does not exist", "no such file")),
    "a socket": (_bind_socket, ("socket",)),
}
PATH_ARGUMENTS = ["--model", "--tokenizer", "--tokenizer-config", "--json-schema", "--grammar",
                  "the export report"]


def model_dir(tiny_pte: Path, directory: Path) -> Path:
    """A copy of the tiny export with its report, in a directory of its own."""
    directory.mkdir(parents=True)
    shutil.copyfile(tiny_pte, directory / tiny_pte.name)
    shutil.copyfile(tiny_pte.with_suffix(".report.json"), directory / f"{tiny_pte.stem}.report.json")
    return directory / tiny_pte.name


def test_special_files_in_every_path_argument_are_refused_without_blocking(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    """Every path rne_llm opens, given every kind of non-regular file: opened with O_NONBLOCK and
    checked on the descriptor, so a FIFO or an endless device is an error naming it."""
    try:
        for i, (kind, (make, causes)) in enumerate(SPECIAL_FILES.items()):
            for argument in PATH_ARGUMENTS:
                model = model_dir(tiny_pte, tmp_path / f"{i}-{argument.strip('-')[:12]}")
                special = model.parent / "special"
                extra: list[str | Path] = ["--raw"]
                tokenizer: Path = byte_tokenizer
                if argument == "--model":
                    special = model.parent / "special.pte"
                    model = special
                elif argument == "--tokenizer":
                    tokenizer = special
                elif argument == "--tokenizer-config":
                    extra = ["--tokenizer-config", special]
                elif argument == "--json-schema":
                    extra += ["--json-schema", special]
                elif argument == "--grammar":
                    extra += ["--grammar", special]
                else:
                    special = model.with_suffix(".report.json")
                    special.unlink()
                make(special)
                done = run_bounded(rne_llm, "--model", model, "--tokenizer", tokenizer, *extra,
                                   "--max-new-tokens", "2", "hi")
                outcome = bounded_outcome(f"rne_llm, {kind} as {argument}", done, causes)
                assert outcome == CLEAN, LEDGER.outcomes[outcome][-1]
    finally:
        while SOCKETS:
            SOCKETS.pop().close()


@pytest.fixture(scope="module")
def rne_image() -> Path:
    from conftest import _host_binary

    return _host_binary("rne_image")


def test_special_files_as_pictures_are_refused_without_blocking(rne_image: Path, tmp_path: Path) -> None:
    """The image path (rne_image reads it as rne_llm --image does, through cpp/media): a FIFO
    with no writer used to block the read forever."""
    try:
        for i, (kind, (make, causes)) in enumerate(SPECIAL_FILES.items()):
            special = tmp_path / f"{i}.png"
            make(special)
            done = run_bounded(rne_image, special, tmp_path / f"out{i}")
            outcome = bounded_outcome(f"rne_image, {kind} as the picture", done, causes)
            assert outcome == CLEAN, LEDGER.outcomes[outcome][-1]
    finally:
        while SOCKETS:
            SOCKETS.pop().close()


def _png(width: int, height: int, *chunks: tuple[bytes, bytes]) -> bytes:
    """A PNG signature, an 8-bit RGB IHDR and ``chunks`` (CRCs left zero: not checked)."""
    out = b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sIIBBBBBI", 13, b"IHDR", width, height, 8, 2, 0, 0, 0, 0)
    for kind, data in chunks:
        out += struct.pack(">I", len(data)) + kind + data + b"\0\0\0\0"
    return out


# Pictures that crashed the decoder path (issue #63) or made it allocate for pixels that the file
# cannot hold, and what the error must say.
HOSTILE_PICTURES: dict[str, tuple[bytes, str]] = {
    "a 45-byte PNG whose chunk declares 0xFFFFFFFF bytes": (
        _png(1, 1) + b"\xff\xff\xff\xffIDAT\0\0\0\0", "declares 4294967295 bytes"),
    "a 4000x4000 PNG from 10 bytes of data": (
        _png(4000, 4000, (b"IDAT", b"\x78\x9c" + bytes(8)), (b"IEND", b"")), "too few for that many"),
    "a JPEG Huffman table of 272 codes": (
        b"\xff\xd8\xff\xc4\x01\x23\x00" + bytes([17] * 16) + bytes(272)
        + b"\xff\xc0\x00\x0b\x08\x00\x08\x00\x08\x01\x01\x11\x00\xff\xd9", "bad DHT header"),
    "a PNG of 70000x70000 pixels": (_png(70000, 70000), "over the limit"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_PICTURES))
def test_hostile_pictures_are_clear_errors(rne_image: Path, tmp_path: Path, name: str) -> None:
    data, cause = HOSTILE_PICTURES[name]
    picture = tmp_path / "picture"
    picture.write_bytes(data)
    done = run_bounded(rne_image, picture, tmp_path / "out")
    assert bounded_outcome(f"rne_image, {name}", done, (cause,)) == CLEAN
    assert not (tmp_path / "out.pixels.f32").exists()


def test_empty_constraints_are_refused_not_ignored(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    """An empty schema or grammar file, or an empty pattern, used to mean "no constraint": the
    run went on unconstrained and exited 0."""
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    cases = {
        "--json-schema": (["--json-schema", empty], "is empty (expected a JSON Schema file"),
        "--grammar": (["--grammar", empty], "is empty (expected a GBNF grammar"),
        "--regex ''": (["--regex", ""], "--regex: the pattern is empty"),
    }
    for name, (flags, cause) in cases.items():
        done = run_bounded(rne_llm, "--model", tiny_pte, "--tokenizer", byte_tokenizer, "--raw",
                           "--max-new-tokens", "2", *flags, "hi")
        assert bounded_outcome(f"rne_llm, an empty {name}", done, (cause,)) == CLEAN


def test_deeply_nested_grammar_is_a_clear_error(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    """12,000 nested groups overflowed the GBNF parser's stack."""
    grammar = tmp_path / "deep.gbnf"
    grammar.write_text("root ::= " + "(" * 12000 + '"x"' + ")" * 12000 + "\n")
    done = run_bounded(rne_llm, "--model", tiny_pte, "--tokenizer", byte_tokenizer, "--raw",
                       "--max-new-tokens", "2", "--grammar", grammar, "hi")
    assert bounded_outcome("rne_llm, 12,000 nested GBNF groups", done, ("kMaxGbnfNesting",)) == CLEAN


def unusable_reports(pte_name: str, sha256: str) -> dict[str, bytes]:
    """Export reports that exist but cannot verify the model beside them."""
    good = {"file": pte_name, "sha256": sha256}
    dump = lambda doc: json.dumps(doc).encode()  # noqa: E731
    return {
        "an empty report": b"",
        "a report that is not JSON": b"not json at all",
        "a report cut short": dump(good)[:-7],
        "a report that is a JSON array": dump([good]),
        "a report of another file": dump({**good, "file": "other.pte"}),
        "a report without a file": dump({"sha256": sha256}),
        "a report without a sha256": dump({"file": pte_name}),
        "a report with a short sha256": dump({**good, "sha256": sha256[:40]}),
        "a report whose sha256 ends in a newline": dump({**good, "sha256": sha256 + "\n"}),
        "a report with a numeric sha256": dump({**good, "sha256": 12345}),
        "a report with invalid UTF-8": dump(good).replace(b'"file"', b'"fi\xffle"'),
        "a report nested 10000 deep": b"[" * 10000 + b"]" * 10000,
        "a report over the size limit": b" " * (5 << 20) + dump(good),
    }


def test_an_export_report_that_cannot_be_used_is_an_error_not_an_unchecked_run(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    sha256 = json.loads(tiny_pte.with_suffix(".report.json").read_text())["sha256"]
    for i, (name, content) in enumerate(unusable_reports(tiny_pte.name, sha256).items()):
        model = model_dir(tiny_pte, tmp_path / str(i))
        model.with_suffix(".report.json").write_bytes(content)
        done = run_bounded(rne_llm, "--model", model, "--tokenizer", byte_tokenizer, "--raw",
                           "--max-new-tokens", "2", "hi")
        assert bounded_outcome(f"rne_llm, {name}", done, ("export report beside",)) == CLEAN
        # The way out the message offers works: the registry's checksum verifies the model.
        if i == 0:
            done = run_llm(rne_llm, "--model", model, "--tokenizer", byte_tokenizer, "--raw",
                           "--json", "--sha256", sha256, "--max-new-tokens", "2", "hi")
            assert json.loads(done.stdout)["integrity"] == "hashed"
    # With no report at all the run goes on, and says so where a user looks.
    model = model_dir(tiny_pte, tmp_path / "none")
    model.with_suffix(".report.json").unlink()
    done = run_llm(rne_llm, "--model", model, "--tokenizer", byte_tokenizer, "--raw",
                   "--max-new-tokens", "2", "hi")
    assert done.returncode == 0 and b"unchecked" in done.stderr, done.stderr


def weight_offsets(data: bytes) -> list[int]:
    """Offsets of the float32 weights past the program: the aligned words whose value looks
    like a weight of the tiny random model (|x| in [1e-3, 1]); offsets, sizes and ids read as
    floats are denormal or huge."""
    program_size = int.from_bytes(data[16:24], "little")
    start = (program_size + 3) // 4 * 4
    return [start + 4 * i for i, (x,) in enumerate(struct.iter_unpack("<f", data[start:len(data) // 4 * 4]))
            if 1e-3 <= abs(x) <= 1]


def other_weights(data: bytes) -> bytes:
    """The program with its weights' signs flipped: it loads and runs, finite, differently."""
    weights = bytearray(data)
    for offset in weight_offsets(data):
        weights[offset + 3] ^= 0x80
    return bytes(weights)


RACES = ["renamed over the path", "rewritten in place"]


@pytest.mark.parametrize("race", RACES)
def test_a_model_replaced_while_it_is_verified_never_runs_as_verified(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path, race: str
) -> None:
    """A second thread swaps the model file for one with other weights, as fast as it can,
    while rne_llm verifies and loads it (sha256 from --sha256). Each run must either fail as a
    corrupt file or generate exactly what the verified model generates."""
    good = tiny_pte.read_bytes()
    bad = other_weights(good)
    sha256 = json.loads(tiny_pte.with_suffix(".report.json").read_text())["sha256"]
    env = {"RNE_CACHE_DIR": str(tmp_path / "cache")}
    model = tmp_path / "model.pte"
    model.write_bytes(good)
    args = ["--tokenizer", byte_tokenizer, "--raw", "--json", "--max-new-tokens", "8", "hi"]

    def tokens_of(path: Path) -> list[int]:
        done = run_llm(rne_llm, "--model", path, *args, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["tokens"]

    expected = tokens_of(model)
    (tmp_path / "bad.pte").write_bytes(bad)
    assert tokens_of(tmp_path / "bad.pte") != expected, "the swapped-in model must answer otherwise"

    stop = threading.Event()

    def swap() -> None:
        staged = [tmp_path / "stage-good", tmp_path / "stage-bad"]
        for flip in itertools.cycle([1, 0]):
            if stop.is_set():
                break
            if race == RACES[0]:
                staged[flip].write_bytes(bad if flip else good)
                staged[flip].replace(model)
            else:
                with model.open("r+b") as f:
                    f.write(bad if flip else good)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        for i in range(25):
            done = run_bounded(rne_llm, "--model", model, "--sha256", sha256, *args, env=env)
            name = f"rne_llm, model {race} during verification (run {i})"
            if done is not None and done.returncode == 0:
                ran = json.loads(done.stdout)["tokens"]
                outcome = LEDGER.record(name, HANDLED if ran == expected else SILENT,
                                        f"tokens {ran}")
            else:
                outcome = bounded_outcome(name, done, ("corrupt file", "while it was read"))
            assert outcome in (CLEAN, HANDLED), LEDGER.outcomes[outcome][-1]
    finally:
        stop.set()
        swapper.join()


def test_a_model_truncated_while_it_runs_does_not_kill_the_run(rne_llm: Path, tmp_path: Path) -> None:
    """rne_llm holds a private copy of the model: truncating the file between two turns of an
    interactive chat (where a memory-mapped model dies of SIGBUS) changes nothing. The real
    SmolLM2 (8da4w, the smallest): a chat needs its context and its template."""
    # The export and checkpoint caches are the machine's, not this module's memo directory.
    with pytest.MonkeyPatch.context() as patch:
        if MACHINE_CACHE_DIR is None:
            patch.delenv("RNE_CACHE_DIR", raising=False)
        else:
            patch.setenv("RNE_CACHE_DIR", MACHINE_CACHE_DIR)
        export = cached_export("smollm2_135m", "xnnpack", "8da4w", progress=False, **SMOLLM2_8DA4W)
        checkpoint = default_checkpoint("smollm2_135m")
    model = model_dir(export.pte_path, tmp_path / "m")
    chat = subprocess.Popen(
        [rne_llm, "--model", model, "--tokenizer", checkpoint / "tokenizer.json",
         "--max-new-tokens", "4", "--interactive", "hi"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert chat.stdin is not None and chat.stderr is not None
    seen = b""
    deadline = time.monotonic() + HANG_TIMEOUT_S
    while b"\n> " not in seen and time.monotonic() < deadline:  # the first answer is done
        chunk = chat.stderr.read1(4096)
        if not chunk:
            break
        seen += chunk
    with model.open("r+b") as f:
        f.truncate(100)
    try:
        out, err = chat.communicate(b"and again\n", timeout=HANG_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        chat.kill()
        out, err = chat.communicate()
    stderr = (seen + err).decode(errors="replace")
    name = "rne_llm --interactive, model truncated between turns"
    if chat.returncode != 0:
        outcome = LEDGER.record(name, CRASH, f"exit {chat.returncode}: {stderr[-300:]}")
    else:
        # Both turns answered: two stats lines.
        answered = stderr.count("stop: ") == 2
        outcome = LEDGER.record(name, HANDLED if answered else SILENT, stderr[-300:])
    assert outcome == HANDLED, LEDGER.outcomes[outcome][-1]


def test_damaged_weights_without_a_checksum_are_caught_when_they_reach_the_logits(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    """NaN written over one weight at 24 places across the weights, no checksum known. A NaN
    that reaches the logits is a clean corrupt-file error (before, the garbage it makes was
    printed with exit 0); a weight the prompt does not reach changes nothing. The limit, printed
    and not counted: a NaN that NaN-ignoring ops (max, compare-and-select) turn into finite
    values still changes the answer silently; only a checksum catches that."""
    data = tiny_pte.read_bytes()
    args = ["--tokenizer", byte_tokenizer, "--raw", "--json", "--max-new-tokens", "4", "hi"]
    expected = json.loads(run_llm(rne_llm, "--model", tiny_pte, *args).stdout)["tokens"]
    path = tmp_path / "damaged.pte"
    weights = weight_offsets(data)
    laundered = []
    for offset in weights[:: len(weights) // 24][:24]:
        path.write_bytes(data[:offset] + struct.pack("<f", math.nan) + data[offset + 4:])
        done = run_bounded(rne_llm, "--model", path, *args)
        name = f"rne_llm, NaN weight at byte {offset}, no checksum"
        if done is not None and done.returncode == 0:
            if json.loads(done.stdout)["tokens"] != expected:
                laundered.append(offset)
                continue
            outcome = LEDGER.record(name, HANDLED, "answers as the intact model")
        else:
            outcome = bounded_outcome(name, done, ("corrupt file",))
        assert outcome in (CLEAN, HANDLED), LEDGER.outcomes[outcome][-1]
    caught = sum("NaN weight" in item for item in LEDGER.outcomes.get(CLEAN, []))
    print(f"NaN weights: {caught} caught, {len(laundered)} changed the answer unseen "
          f"(offsets {laundered[:5]})")
    assert caught >= 12, f"only {caught} of 24 NaN weights caught"


def hostile_chains(tokenizer: dict[str, Any]) -> dict[str, str]:
    """The byte tokenizer with normalizer/pre-tokenizer/decoder chains that grow text without
    bound or are absurdly long (all valid JSON, every step a supported type)."""
    doubling = {"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}
    strip = {"type": "Strip", "strip_left": True, "strip_right": True}
    metaspace = {"type": "Metaspace", "replacement": "  ", "prepend_scheme": "always"}
    decoder_doubling = {"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}

    def nested(step: dict[str, Any], key: str, depth: int) -> str:
        # As text: json.dumps recurses once per level.
        one = json.dumps(step)
        return f'{{"type": "Sequence", "{key}": [{one}, ' * depth + one + "]}" * depth

    chains = {
        "a normalizer of 64 doubling Replaces": {
            "normalizer": {"type": "Sequence", "normalizers": [doubling] * 64}},
        "a normalizer of 7 doubling Replaces": {
            "normalizer": {"type": "Sequence", "normalizers": [doubling] * 7}},
        "a normalizer of 5000 Strips": {
            "normalizer": {"type": "Sequence", "normalizers": [strip] * 5000}},
        "a normalizer nested 100 deep": {"normalizer": nested(doubling, "normalizers", 100)},
        "a normalizer nested 3000 deep": {"normalizer": nested(strip, "normalizers", 3000)},
        "a decoder nested 100 deep": {"decoder": nested(decoder_doubling, "decoders", 100)},
        "a Prepend of 1 MB": {"normalizer": {"type": "Prepend", "prepend": "x" * (1 << 20)}},
        "a pre-tokenizer of 3000 Metaspaces": {
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [metaspace] * 3000}},
        "a pre-tokenizer of 40 ByteLevels": {
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [tokenizer["pre_tokenizer"]] * 40}},
        "a decoder of 64 doubling Replaces": {
            "decoder": {"type": "Sequence", "decoders": [decoder_doubling] * 64}},
        "a decoder of 5000 ByteLevels": {
            "decoder": {"type": "Sequence", "decoders": [tokenizer["decoder"]] * 5000}},
    }
    texts = {}
    for name, change in chains.items():
        doc = json.dumps({**tokenizer, **{k: f"@{k}@" for k in change}})
        for key, value in change.items():
            doc = doc.replace(f'"@{key}@"', value if isinstance(value, str) else json.dumps(value))
        texts[name] = doc
    return texts


def test_tokenizer_chains_that_allocate_without_bound_are_refused_at_load(
    rne_llm: Path, byte_tokenizer: Path, tiny_pte: Path, tmp_path: Path
) -> None:
    base = json.loads(byte_tokenizer.read_text())
    for i, (name, doc) in enumerate(hostile_chains(base).items()):
        path = tmp_path / f"tokenizer{i}.json"
        path.write_text(doc)
        done = run_bounded(rne_llm, "--model", tiny_pte, "--tokenizer", path, "--raw",
                           "--max-new-tokens", "2", "a" * 64)
        outcome = bounded_outcome(f"rne_llm, tokenizer with {name}", done,
                                  ("over the limit", "nesting too deep"))
        assert outcome == CLEAN, LEDGER.outcomes[outcome][-1]


# --- rne_tokenize --jsonl: a bad line is reported and the stream goes on --------------------

JSONL_BAD_LINES = [
    (b'"\\ud800"', "unpaired surrogate"),
    (b'"\\udc00x"', "unpaired surrogate"),
    (b'"a\xffb"', "not valid UTF-8"),
    (b'{"text": "hi"}', "expected a JSON string, got object"),
    (b"42", "expected a JSON string, got number"),
    (b'"unterminated', "not valid JSON"),
    (b"", "not valid JSON"),
]


def test_tokenize_jsonl_reports_bad_lines_and_continues(byte_tokenizer: Path) -> None:
    binary = cpp_tokenizer.rne_tokenize_binary()
    good = [b'"hello"', b'"z\\u00e9"', b'"\\ud83d\\ude00"']  # the last is a valid surrogate pair
    lines = [good[0], *[line for line, _ in JSONL_BAD_LINES], *good[1:]]
    done = subprocess.run([binary, byte_tokenizer, "--jsonl"], input=b"\n".join(lines) + b"\n",
                          capture_output=True, timeout=60)
    rows = [json.loads(line) for line in done.stdout.decode().split("\n") if line]
    assert len(rows) == len(lines), "one output line per input line, bad ones included"
    assert [r.get("decoded") for r in (rows[0], rows[-2], rows[-1])] == ["hello", "zé", "😀"]
    assert done.returncode == 1
    stderr = done.stderr.decode()
    for i, (line, cause) in enumerate(JSONL_BAD_LINES, start=2):
        row = rows[i - 1]
        name = f"rne_tokenize --jsonl line {line!r}"
        if "error" not in row:
            LEDGER.record(name, SILENT, json.dumps(row))
        elif cause not in row["error"] or f"stdin line {i}: " not in stderr:
            LEDGER.record(name, UNCLEAR, f"wanted {cause!r}, got {row['error']!r}")
        else:
            LEDGER.record(name, CLEAN, row["error"])
    assert LEDGER.count(SILENT) == LEDGER.count(UNCLEAR) == 0


def test_tokenize_decode_jsonl_reports_bad_lines_and_continues(byte_tokenizer: Path) -> None:
    binary = cpp_tokenizer.rne_tokenize_binary()
    lines = [b"[72, 73]", b"[-1]", b'["a"]', b"[1.5]", b"[4294967296]", b"{}", b"[72]"]
    done = subprocess.run([binary, byte_tokenizer, "--decode-jsonl"],
                          input=b"\n".join(lines) + b"\n", capture_output=True, timeout=60)
    rows = [json.loads(line) for line in done.stdout.decode().split("\n") if line]
    assert len(rows) == len(lines) and done.returncode == 1
    assert "decoded" in rows[0] and "decoded" in rows[-1]
    for line, row in zip(lines[1:-1], rows[1:-1], strict=True):
        name = f"rne_tokenize --decode-jsonl line {line!r}"
        ok = "error" in row and ("token id" in row["error"] or "expected a JSON array" in row["error"])
        LEDGER.record(name, CLEAN if ok else (UNCLEAR if "error" in row else SILENT), str(row))
        assert ok, row


# --- the registry: hostile entries ---------------------------------------------------------


@pytest.fixture
def reg_dir(tmp_path: Path) -> Path:
    target = tmp_path / "model-registry"
    shutil.copytree(REGISTRY_DIR, target)
    return target


def smol(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["models"][0]


def edit_yaml(reg_dir: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = reg_dir / "smollm2.yaml"
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


HOSTILE_ENTRIES = [
    ("revision main", lambda d: smol(d)["hf"].update(revision="main"), "hf.revision"),
    ("revision branch", lambda d: smol(d)["hf"].update(revision="release"), "hf.revision"),
    ("short commit", lambda d: smol(d)["hf"].update(revision="abc1234"), "hf.revision"),
    ("revision ..", lambda d: smol(d)["hf"].update(revision=".."), "hf.revision"),
    ("repo with ..", lambda d: smol(d)["hf"].update(repo="../../etc"), "hf.repo"),
    ("repo owner ..", lambda d: smol(d)["hf"].update(repo="../x"), "hf.repo"),
    ("repo a/..", lambda d: smol(d)["hf"].update(repo="a/.."), "hf.repo"),
    ("source repo ..", lambda d: smol(d).update(source={"hf_repo": "x/.."}), "source.hf_repo"),
    ("size 2^53", lambda d: smol(d)["source"].update(size=2**53), "source.size"),
    ("size 2^64", lambda d: smol(d)["source"].update(size=2**64), "source.size"),
    ("id constructor", lambda d: smol(d).update(id="constructor"), "models[0].id"),
    ("id __proto__", lambda d: smol(d).update(id="__proto__"), "models[0].id"),
    ("id toString", lambda d: smol(d).update(id="toString"), "models[0].id"),
    ("id hasOwnProperty", lambda d: smol(d).update(id="hasOwnProperty"), "models[0].id"),
    ("id with quote", lambda d: smol(d).update(id="a'b"), "models[0].id"),
    ("id with space", lambda d: smol(d).update(id="a b"), "models[0].id"),
    ("name with newline", lambda d: smol(d).update(name="a\n} evil()"), "models[0].name"),
    ("name with U+2028", lambda d: smol(d).update(name="a\u2028b"), "models[0].name"),
    ("display_name with NUL", lambda d: d.update(display_name="a\0"), "display_name"),
    ("license injection", lambda d: smol(d).update(license="x' + evil() + '"), "license"),
    (
        "tokenizer without tokenizer.json",
        lambda d: smol(d)["tokenizer"].update(files=[{"path": "tokenizer_config.json"}]),
        "tokenizer.files: must include 'tokenizer.json'",
    ),
    (
        "file path ..",
        lambda d: smol(d)["variants"][0]["files"][0].update(path="../x.pte"),
        "variants[0].files[0].path",
    ),
    (
        "file path a/../b",
        lambda d: smol(d)["variants"][0]["files"][0].update(path="xnnpack/../x.pte"),
        "variants[0].files[0].path",
    ),
    (
        "file path ./",
        lambda d: smol(d)["variants"][0]["files"][0].update(path="./x.pte"),
        "variants[0].files[0].path",
    ),
    (
        "absolute file path",
        lambda d: smol(d)["variants"][0]["files"][0].update(path="/etc/x.pte"),
        "variants[0].files[0].path",
    ),
    (
        "empty segment",
        lambda d: smol(d)["variants"][0]["files"][0].update(path="xnnpack//x.pte"),
        "variants[0].files[0].path",
    ),
    (
        "backslash path",
        lambda d: smol(d)["variants"][0]["files"][0].update(path="..\\x.pte"),
        "variants[0].files[0].path",
    ),
    (
        "chat template ..",
        lambda d: smol(d)["tokenizer"].update(chat_template="../tokenizer_config.json"),
        "tokenizer.chat_template",
    ),
    ("source file ..", lambda d: smol(d)["source"].update(file="../x.gguf"), "source.file"),
]


@pytest.mark.parametrize(
    ("name", "change", "where"), HOSTILE_ENTRIES, ids=[n for n, _, _ in HOSTILE_ENTRIES]
)
def test_hostile_registry_entries_are_refused(
    reg_dir: Path, name: str, change: Callable, where: str
) -> None:
    edit_yaml(reg_dir, change)
    outcome = python_outcome(
        f"registry {name}", lambda: registry.load_registry(reg_dir), RegistryError, where
    )
    assert outcome == CLEAN, LEDGER.outcomes
    with pytest.raises(RegistryError) as info:
        registry.load_registry(reg_dir)
    assert "smollm2.yaml: " in str(info.value)  # the file, then the field, then the model


def test_registry_errors_name_file_field_and_model(reg_dir: Path) -> None:
    edit_yaml(reg_dir, lambda d: smol(d)["hf"].update(revision="main"))
    with pytest.raises(RegistryError) as info:
        registry.load_registry(reg_dir)
    message = str(info.value)
    assert "smollm2.yaml: models[0].hf.revision: 'main'" in message
    assert "never a branch" in message and "(model 'smollm2_135m')" in message


def test_duplicate_yaml_keys_are_refused(reg_dir: Path) -> None:
    path = reg_dir / "smollm2.yaml"
    text = path.read_text()
    path.write_text(text.replace("    license: apache-2.0\n", "    license: apache-2.0\n    license: mit\n"))
    outcome = python_outcome(
        "registry duplicate key", lambda: registry.load_registry(reg_dir), RegistryError,
        "duplicate key 'license'",
    )
    assert outcome == CLEAN, LEDGER.outcomes
    path.write_text(text.replace("family: smollm2\n", "family: smollm2\nfamily: smollm2\n"))
    outcome = python_outcome(
        "registry duplicate top-level key", lambda: registry.load_registry(reg_dir),
        RegistryError, "smollm2.yaml: not valid YAML",
    )
    assert outcome == CLEAN, LEDGER.outcomes


INJECTION_NAMES = [
    "It's \"quoted\" \\ back\\slashed",
    "x' }; globalThis.pwned = 1; const y = { a: '",
    'x" }; globalThis.pwned = 1; //',
    "*/ globalThis.pwned = 1; /*",
    "${globalThis.pwned = 1}`",
    "</script><script>globalThis.pwned=1</script>",
    "zażółć 漢字 🙂",
]


def test_hostile_names_are_escaped_in_the_generated_typescript(reg_dir: Path, tmp_path: Path) -> None:
    """Legal-but-hostile display names: the generated file, compiled by the real TypeScript
    compiler and evaluated, yields exactly those strings and runs none of them."""
    names = iter(INJECTION_NAMES)
    edit_yaml(reg_dir, lambda d: (smol(d).update(name=next(names)), d.update(display_name="x")))
    gemma = reg_dir / "gemma4.yaml"
    doc = yaml.safe_load(gemma.read_text())
    doc["models"][0]["name"] = next(names)
    gemma.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    ts_file = tmp_path / "registry.generated.ts"
    codegen.write_typescript(registry.load_registry(reg_dir), ts_file)
    typescript = REPO_ROOT / "node_modules" / "typescript"
    if not typescript.is_dir():
        pytest.fail("node_modules/typescript is missing: run `make setup`")
    script = """
      const ts = require(process.argv[1]);
      const fs = require('fs');
      const out = ts.transpileModule(fs.readFileSync(process.argv[2], 'utf8'), {
        compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2020 },
        reportDiagnostics: true,
      });
      if (out.diagnostics.length) throw new Error(JSON.stringify(out.diagnostics.map(d => d.messageText)));
      const exports = {};
      new Function('exports', out.outputText)(exports);
      const llm = exports.models.llm;
      console.log(JSON.stringify({
        pwned: globalThis.pwned === undefined ? null : globalThis.pwned,
        ids: Object.keys(llm),
        names: Object.fromEntries(Object.entries(llm).map(([k, v]) => [k, v.name])),
      }));
    """
    done = subprocess.run(["node", "-e", script, str(typescript), str(ts_file)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    expected = {"smollm2_135m": INJECTION_NAMES[0], "gemma4_e2b": INJECTION_NAMES[1]}
    assert result["pwned"] is None and result["names"] == expected
    for name in INJECTION_NAMES[:2]:
        LEDGER.record(f"registry name {name!r}", HANDLED, "escaped; compiled and evaluated intact")
    # The rest: one model at a time, each through the same compile-and-evaluate check.
    for name in INJECTION_NAMES[2:]:
        edit_yaml(reg_dir, lambda d, name=name: smol(d).update(name=name))
        codegen.write_typescript(registry.load_registry(reg_dir), ts_file)
        done = subprocess.run(["node", "-e", script, str(typescript), str(ts_file)],
                              capture_output=True, text=True, timeout=60)
        ok = done.returncode == 0 and json.loads(done.stdout)["names"]["smollm2_135m"] == name
        ok = ok and json.loads(done.stdout)["pwned"] is None
        LEDGER.record(f"registry name {name!r}", HANDLED if ok else CRASH, done.stderr[-300:])
        assert ok, done.stdout + done.stderr


# --- paths built from registry or caller data ------------------------------------------------

UNSAFE_RELATIVE = ["../x", "a/../../x", "./a", "a/./b", "a//b", "/etc/passwd", "", "a\\..\\b",
                   "a\0b", "a/.", ".."]


@pytest.mark.parametrize("relative", UNSAFE_RELATIVE)
def test_contained_path_refuses_escapes(tmp_path: Path, relative: str) -> None:
    outcome = python_outcome(
        f"contained_path({relative!r})",
        lambda: contained_path(tmp_path, relative, what="registry file path"),
        UnsafePathError, "registry file path",
    )
    assert outcome == CLEAN


def test_contained_path_refuses_a_symlink_out_and_allows_plain_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    assert contained_path(root, "sub/model.pte", what="x") == root / "sub" / "model.pte"
    outcome = python_outcome(
        "contained_path through a symlink", lambda: contained_path(root, "out/x", what="file"),
        UnsafePathError, "through a symlink",
    )
    assert outcome == CLEAN


BAD_RELEASE_TAGS = ["main", "v1", "v1.0", "../v1.0.0", "v1.0.0/../x", "refs/tags/v1.0.0",
                    "v1.0.0-", "v1.0.0-rc..1", "a" * 40, "V1.0.0"]


@pytest.mark.parametrize("revision", BAD_RELEASE_TAGS)
def test_publish_refuses_a_revision_that_is_not_a_release_tag(tmp_path: Path, revision: str) -> None:
    """The tag the publisher creates is written into the registry, so it must be one the
    registry accepts as pinned (and a tag, not a bare commit): checked before anything else."""
    outcome = python_outcome(
        f"publish --revision {revision!r}",
        lambda: plan_publish("smollm2_135m", revision, tmp_path, tmp_path),
        PublishError, "must be a release tag",
    )
    assert outcome == CLEAN


def test_publish_accepts_a_pre_release_tag(tmp_path: Path) -> None:
    """A valid tag passes the revision check and fails later, on the missing export."""
    with pytest.raises(PublishError, match="not found: export the xnnpack variant first"):
        plan_publish("smollm2_135m", "v1.2.3-rc.1", tmp_path, tmp_path)

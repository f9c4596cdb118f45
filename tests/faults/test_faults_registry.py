"""Generated hostile registries against ``tools/gen_registry.py``: a fault suite per class.

Every case is a mutation of the real family files (``model-registry/*.yaml`` as they are in the
checkout): each string field with a trailing newline, whitespace or a control character; each
number in a YAML 1.1 or non-finite form, or beyond what JavaScript represents exactly; strings
far beyond their field's length; alias bombs, deep nesting, complex keys, explicit tags; bytes
that are not UTF-8 or not YAML; file paths that collide on a case-insensitive file system, as
file and folder, or with the fetcher's own ``.part``/``.verified`` files; special files in place
of a family file. The CLI runs in-process on each (a subprocess only for the special files,
which could block a reader forever), and each outcome is classified:

- clean error: exit status 1, every stderr line is one ``error:`` line, and one of them names
  the file and the field (or the cause where no field exists, as for bytes that are not UTF-8);
- handled: a control that must be accepted was, and its value reached the generated TypeScript;
- crash: a Python exception escaped (a traceback) or the process died;
- hang: no answer within the time limit;
- silent acceptance: exit status 0 for input that must be refused;
- unclear: refused, but not as one ``error:`` line per problem naming file and field, or with a
  line too long to read;
- wrongly refused: a control that must be accepted was refused.

The module's summary prints the counts past pytest's capture and asserts all but the first two
are 0.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import random
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

import gen_registry
from rne_tools import registry
from rne_tools.paths import REPO_ROOT

CLEAN, HANDLED = "clean error", "handled"
CRASH, HANG, SILENT, UNCLEAR, WRONG = (
    "crash", "hang", "silent acceptance", "unclear", "wrongly refused"
)
BAD = (CRASH, HANG, SILENT, UNCLEAR, WRONG)
CASE_TIMEOUT_S = 5.0
# An error line longer than this does not say what is wrong at a glance (it echoes the input).
MAX_LINE = 600
SHA = "ab" * 32
PLACEHOLDER = "RNE_FAULT_PLACEHOLDER"


@dataclass
class Ledger:
    outcomes: dict[str, list[str]] = field(default_factory=dict)
    by_class: dict[str, dict[str, int]] = field(default_factory=dict)

    def record(self, cls: str, name: str, outcome: str, detail: str = "") -> str:
        self.outcomes.setdefault(outcome, []).append(f"{cls}/{name}: {detail}"[:300])
        counts = self.by_class.setdefault(cls, {})
        counts[outcome] = counts.get(outcome, 0) + 1
        return outcome

    def count(self, outcome: str) -> int:
        return len(self.outcomes.get(outcome, []))

    @property
    def tried(self) -> int:
        return sum(len(v) for v in self.outcomes.values())


LEDGER = Ledger()


@pytest.fixture(scope="module", autouse=True)
def summary(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    lines = [
        f"cases tried: {LEDGER.tried}, clean errors: {LEDGER.count(CLEAN)}, handled (accepted "
        f"and verified): {LEDGER.count(HANDLED)}, crashes: {LEDGER.count(CRASH)}, hangs: "
        f"{LEDGER.count(HANG)}, silent acceptances: {LEDGER.count(SILENT)}, unclear errors: "
        f"{LEDGER.count(UNCLEAR)}, wrongly refused: {LEDGER.count(WRONG)}"
    ]
    for cls, counts in LEDGER.by_class.items():
        lines.append(f"  {cls}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for bad in BAD:
        shown = LEDGER.outcomes.get(bad, [])
        lines += [f"  {bad}: {item}" for item in shown[:15]]
        if len(shown) > 15:
            lines.append(f"  {bad}: ... and {len(shown) - 15} more")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    write = reporter.write_line if reporter else print
    # Printed past pytest's output capture, so the summary shows in every run.
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        write("")
        for line in lines:
            write(f"[faults/registry] {line}")
    assert all(LEDGER.count(bad) == 0 for bad in BAD), "\n".join(lines)


@pytest.fixture(scope="module", autouse=True)
def memory_cap() -> Iterator[None]:
    """An alias bomb that a loader expands must fail with MemoryError, not take the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as statm:
            used = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: no address-space cap to set
        yield
        return
    cap = used + (3 << 30)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# --- the real registry, as the mutations' base ------------------------------------------------

REAL = {p.name: p.read_text() for p in registry.registry_files()}


def _published(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with every file set published (so sha256 and size fields exist to mutate)."""
    doc = copy.deepcopy(doc)
    for model in doc["models"]:
        for file_set in [model["tokenizer"], *model["variants"]]:
            file_set["status"] = "published"
            for f in file_set["files"]:
                f.update(sha256=SHA, size=1234)
    return doc


BASE = {name: _published(yaml.safe_load(text)) for name, text in REAL.items()}


def dump(doc: Any) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(doc, Dumper=dumper, sort_keys=False, allow_unicode=False, width=1 << 30)


def field_name(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))
    else:
        yield path, value


def replaced(doc: Any, path: tuple[str | int, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return doc


def with_raw(name: str, path: tuple[str | int, ...], raw: str) -> str:
    """The family file with the value at ``path`` written as the raw YAML text ``raw``."""
    return dump(replaced(BASE[name], path, PLACEHOLDER)).replace(PLACEHOLDER, raw, 1)


# --- running the CLI in-process ---------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    cls: str
    name: str
    files: dict[str, bytes]  # family file name -> content (the registry holds only these)
    file: str  # the file the error must name
    cause: tuple[str, ...]  # one of these must appear on that line (the field, or the cause)
    accept: str | None = None  # for a control: text the generated TypeScript must contain


class _Hang(BaseException):
    """Raised by the timer in a case that runs too long (a BaseException: no handler eats it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Hang


def run_cli(reg_dir: Path, package_dir: Path) -> tuple[int, str]:
    """``gen_registry.py`` in-process: (exit status, stderr). Exceptions it lets out propagate."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            gen_registry.main.main(
                args=["--registry-dir", str(reg_dir), "--package-dir", str(package_dir)],
                prog_name="gen_registry.py",
                standalone_mode=True,
            )
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()


def classify_refusal(case: Case, code: int, stderr: str) -> tuple[str, str]:
    if "Traceback" in stderr:
        return CRASH, stderr[-300:]
    if code == 0:
        return SILENT, "exit 0"
    lines = [line for line in stderr.splitlines() if line.strip()]
    stray = [line for line in lines if not line.startswith("error: ")]
    if stray:
        return UNCLEAR, f"not an `error:` line: {stray[0][:200]!r}"
    if any(len(line) > MAX_LINE for line in lines):
        return UNCLEAR, f"an error line of {max(map(len, lines))} characters"
    named = [line for line in lines if f"{case.file}: " in line]
    if not any(cause in line for line in named for cause in case.cause):
        return UNCLEAR, f"wanted {case.file} and one of {case.cause}, got: {stderr[:300]!r}"
    return CLEAN, named[0][:200]


def run_case(case: Case, workdir: Path) -> str:
    reg_dir = workdir / "model-registry"
    reg_dir.mkdir(parents=True)
    for name, content in case.files.items():
        (reg_dir / name).write_bytes(content)
    package = workdir / "package"
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_TIMEOUT_S)
    try:
        code, stderr = run_cli(reg_dir, package)
    except _Hang:
        return LEDGER.record(case.cls, case.name, HANG, f"no answer in {CASE_TIMEOUT_S} s")
    except BaseException as exc:  # anything the tool lets out is a traceback for its user
        return LEDGER.record(case.cls, case.name, CRASH, f"{type(exc).__name__}: {exc}"[:300])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if case.accept is not None:
        generated = package / "src" / "models" / "registry.generated.ts"
        if code != 0:
            return LEDGER.record(case.cls, case.name, WRONG, stderr[:300])
        if case.accept not in generated.read_text():
            return LEDGER.record(case.cls, case.name, WRONG, f"{case.accept!r} not generated")
        return LEDGER.record(case.cls, case.name, HANDLED, "accepted, value generated")
    outcome, detail = classify_refusal(case, code, stderr)
    return LEDGER.record(case.cls, case.name, outcome, detail)


def run_all(cases: list[Case], tmp_path: Path) -> None:
    assert len(cases) >= 50, f"only {len(cases)} cases generated"
    for i, case in enumerate(cases):
        run_case(case, tmp_path / f"c{i}")


def refuse(cls: str, name: str, file: str, text: str | bytes, *cause: str) -> Case:
    content = text.encode() if isinstance(text, str) else text
    return Case(cls, name, {file: content}, file, cause or (file,))


# --- class: strings with whitespace or control characters -----------------------------------

INJECTIONS: list[tuple[str, Callable[[str], str]]] = [
    ("trailing LF", lambda s: s + "\n"),
    ("trailing CRLF", lambda s: s + "\r\n"),
    ("two trailing LF", lambda s: s + "\n\n"),
    ("leading LF", lambda s: "\n" + s),
    ("inner LF", lambda s: s[:1] + "\n" + s[1:]),
    ("trailing space", lambda s: s + " "),
    ("leading space", lambda s: " " + s),
    ("trailing tab", lambda s: s + "\t"),
    ("trailing NUL", lambda s: s + "\0"),
    ("trailing ESC", lambda s: s + "\x1b"),
    ("trailing DEL", lambda s: s + "\x7f"),
    ("trailing NEL", lambda s: s + "\x85"),
    ("trailing LS", lambda s: s + "\u2028"),
]


def string_cases() -> list[Case]:
    cases = []
    strings = [(n, d, p, v) for n, d in BASE.items() for p, v in leaves(d) if isinstance(v, str)]
    for k, (name, doc, path, value) in enumerate(strings):
        # Every field gets a trailing newline and, in turn, a third of the other injections.
        for j, (label, inject) in enumerate(INJECTIONS):
            if j and (j + k) % 3:
                continue
            text = dump(replaced(doc, path, inject(value)))
            cases.append(refuse("strings", f"{name}:{field_name(path)} {label}", name, text,
                                field_name(path)))
    return cases


def test_strings_with_whitespace_or_control_characters(tmp_path: Path) -> None:
    run_all(string_cases(), tmp_path)


# --- class: numbers --------------------------------------------------------------------------

# Raw YAML that no registry number may be: YAML 1.1 forms (octal, sexagesimal, underscores,
# booleans), non-decimal or ambiguous forms, non-finite values, integers JavaScript cannot hold.
BAD_NUMBERS = [
    ".nan", ".NaN", ".inf", ".Inf", "-.inf", "+.inf", "1e400", "1.0e+400", "-1.0e+999",
    "0o17", "0o4000", "010", "0777", "08", "0x10", "0b101", "1:30", "190:20:30", "1_000",
    "4_096", "1.5e3", "yes", "no", "on", "Off", "y", "N", "~", "null", "true",
    "9007199254740992", "18446744073709551616", "1" + "0" * 400, "-9007199254740993",
    "2001-12-14", "!!int 010", "!!float .nan", "!!int '4096'",
]
# For fields that take integers only.
BAD_INTEGERS = ["4096.0", "1e3", "2048.5", "'2048'"]
GOOD_NUMBERS = {"temperature": "0.75", "max_new_tokens": "333", "context_length": "8192"}


def number_cases() -> list[Case]:
    cases = []
    numbers = [(n, p, v) for n, d in BASE.items() for p, v in leaves(d)
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for k, (name, path, value) in enumerate(numbers):
        # Each field gets a third of the forms, in turn, so that every form meets every kind.
        forms = BAD_NUMBERS + (BAD_INTEGERS if isinstance(value, int) else [])
        for j, raw in enumerate(forms):
            if (j + k) % 3:
                continue
            cases.append(refuse("numbers", f"{name}:{field_name(path)} = {raw[:20]}", name,
                                with_raw(name, path, raw), field_name(path)))
        good = GOOD_NUMBERS.get(str(path[-1]))
        if good is not None:
            cases.append(Case("numbers", f"{name}:{field_name(path)} = {good} (control)",
                              {name: with_raw(name, path, good).encode()}, name, (),
                              accept=f": {good},"))
    return cases


def test_numbers_in_yaml_1_1_or_non_finite_forms(tmp_path: Path) -> None:
    run_all(number_cases(), tmp_path)


# --- class: strings beyond any sane length ---------------------------------------------------


def lengthened(value: str, n: int) -> str:
    """``value`` made ``n`` characters longer, keeping its pattern where it has one."""
    if "." in value and "/" not in value[-6:] and not value.startswith("v"):
        return "d" * n + "/" + value  # a path: a longer folder name
    if value.startswith("v") and value[1:2].isdigit():
        return value + "-" + "a" * n  # a release tag with a long pre-release part
    return value + "a" * n


def length_cases() -> list[Case]:
    cases = []
    for name, doc in BASE.items():
        strings = [(p, v) for p, v in leaves(doc) if isinstance(v, str)]
        for i, (path, value) in enumerate(strings):
            sizes = [300, 5_000, 70_000] + ([1_000_000] if i % 6 == 0 else [])
            for n in sizes:
                text = dump(replaced(doc, path, PLACEHOLDER)).replace(
                    PLACEHOLDER, lengthened(value, n).replace("\\", "\\\\"), 1)
                cases.append(refuse("lengths", f"{name}:{field_name(path)} +{n}", name, text,
                                    field_name(path)))
    return cases


def test_strings_beyond_their_length(tmp_path: Path) -> None:
    run_all(length_cases(), tmp_path)


# --- class: YAML structure: aliases, nesting, keys, tags, documents -------------------------


def bomb(depth: int, width: int) -> str:
    levels = [f"&a0 [{', '.join(['lol'] * width)}]"]
    for d in range(1, depth):
        levels.append(f"&a{d} [{', '.join([f'*a{d - 1}'] * width)}]")
    return "[" + ", ".join(levels) + "]"


def structure_cases() -> list[Case]:
    cases = []
    name = "smollm2.yaml" if "smollm2.yaml" in BASE else next(iter(BASE))
    doc = BASE[name]
    targets = [("display_name",), ("models", 0, "name"), ("models", 0, "context_length"),
               ("models", 0, "capabilities"), ("models", 0, "hf", "revision"),
               ("models", 0, "variants", 0, "files", 0, "path")]
    for path in targets:
        where = field_name(path)
        for depth, width in [(4, 10), (6, 10), (9, 10), (12, 5), (30, 2), (60, 2)]:
            cases.append(refuse("structure", f"{where} alias bomb {depth}x{width}", name,
                                with_raw(name, path, bomb(depth, width)), where))
        for depth in [40, 200, 5_000, 200_000]:
            cases.append(refuse("structure", f"{where} nested [ {depth}", name,
                                with_raw(name, path, "[" * depth + "]" * depth), where))
            cases.append(refuse("structure", f"{where} nested {{ {depth}", name,
                                with_raw(name, path, "{a: " * depth + "1" + "}" * depth), where))
        cases.append(refuse("structure", f"{where} unclosed nesting", name,
                            with_raw(name, path, "[" * 100_000), "line"))
        cases.append(refuse("structure", f"{where} recursive alias", name,
                            with_raw(name, path, "&r [*r]"), where))
        cases.append(refuse("structure", f"{where} undefined alias", name,
                            with_raw(name, path, "*nowhere"), where))
        for raw in ["{[a, b]: 1}", "{{a: 1}: 2}", "{1: x}", "{true: x}", "{null: x}",
                    "{1.5: x}", "{on: x}", "{<<: {a: 1}}", "{? [a]: b}"]:
            cases.append(refuse("structure", f"{where} key {raw}", name,
                                with_raw(name, path, raw), where))
        for raw in ["!!python/object/apply:os.system ['true']", "!!python/name:os.system ''",
                    "!!binary aGVsbG8=", "!!set {a, b}", "!!omap [a: 1]", "!!timestamp 2001-01-01",
                    "!custom x", "!!int '4096'", "!!float '0.5'", "!!null ''", "!!bool 'yes'"]:
            cases.append(refuse("structure", f"{where} tag {raw[:24]}", name,
                                with_raw(name, path, raw), where))
    base_text = dump(doc)
    root_keys = ["? [a, b]\n: x\n", "? {a: 1}\n: x\n", "1: x\n", "true: x\n", "~: x\n",
                 "[a]: x\n", "<<: {family: x}\n", "on: x\n", "yes: x\n"]
    for raw in root_keys:
        cases.append(refuse("structure", f"root key {raw.strip()!r}", name, base_text + raw,
                            "<root>", "line"))
    for raw, cause in [("", "<root>"), ("# only a comment\n", "<root>"), ("~\n", "<root>"),
                       ("[]\n", "<root>"), ("'text'\n", "<root>"), ("42\n", "<root>"),
                       (base_text + "---\n" + base_text, "line"),
                       ("---\n" + base_text + "...\n---\nx: 1\n", "line"),
                       (base_text.replace("family:", "family: &f", 1)
                        + "extra: *f\n", "extra")]:
        cases.append(refuse("structure", f"document {raw[:30]!r}", name, raw, cause))
    # Controls: an anchor reused legitimately, and text that only YAML 1.1 would take as a
    # boolean, quoted, so it is text.
    mp = ("models", 0, "variants", 0, "min_platform")
    shared = dump(replaced(doc, mp, PLACEHOLDER)).replace(PLACEHOLDER, "&mp {android: 27}", 1)
    shared = shared.replace("display_name:", "x_unused_check: *mp\ndisplay_name:", 1)
    cases.append(refuse("structure", "alias before its anchor", name, shared, "x_unused_check"))
    cases.append(Case("structure", "quoted 'on' as a name (control)",
                      {name: with_raw(name, ("models", 0, "name"), "'on'").encode()}, name, (),
                      accept="name: 'on',"))
    text = dump(replaced(replaced(doc, ("display_name",), PLACEHOLDER + "1"),
                         ("models", 0, "name"), PLACEHOLDER + "2"))
    text = text.replace(PLACEHOLDER + "1", "&n Tiny Name", 1).replace(PLACEHOLDER + "2", "*n", 1)
    cases.append(Case("structure", "small anchor and alias (control)", {name: text.encode()},
                      name, (), accept="name: 'Tiny Name',"))
    return cases


def test_yaml_structure_attacks(tmp_path: Path) -> None:
    run_all(structure_cases(), tmp_path)


# --- class: bytes: not UTF-8, not YAML, too large ------------------------------------------


def bytes_cases() -> list[Case]:
    rng = random.Random(39)
    cases = []
    for name, doc in BASE.items():
        text = dump(doc)
        data = text.encode()
        for i in range(25):
            junk = rng.randbytes(rng.choice([1, 7, 64, 512, 4096]))
            cases.append(refuse("bytes", f"{name} random bytes {i}", name, junk, name))
        for _ in range(12):
            at = rng.randrange(len(data))
            for bad in (b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80"):
                cases.append(refuse("bytes", f"{name} {bad!r} at {at}", name,
                                    data[:at] + bad + data[at:], "UTF-8"))
        for _ in range(8):
            at = rng.randrange(len(data))
            for ctl in (b"\x00", b"\x01", b"\x08", b"\x1f"):
                cases.append(refuse("bytes", f"{name} raw {ctl!r} at {at}", name,
                                    data[:at] + ctl + data[at:], "line"))
        cases.append(refuse("bytes", f"{name} UTF-16 LE", name, text.encode("utf-16"), "UTF-8"))
        cases.append(refuse("bytes", f"{name} UTF-16 BE", name, text.encode("utf-16-be"), "UTF-8"))
        cases.append(refuse("bytes", f"{name} latin-2 name", name,
                            text.replace("display_name: ", "display_name: Zażółć ", 1)
                            .encode("iso8859_2"), "UTF-8"))
        cases.append(refuse("bytes", f"{name} 2 MiB of comments", name,
                            data + b"# padding\n" * 210_000, "larger than"))
        cases.append(refuse("bytes", f"{name} 20 MiB line", name,
                            data + b"# " + b"x" * (20 << 20) + b"\n", "larger than"))
        cases.append(Case("bytes", f"{name} UTF-8 BOM (control)", {name: b"\xef\xbb\xbf" + data},
                          name, (), accept=f"family: '{doc['family']}'"))
        cases.append(Case("bytes", f"{name} CRLF lines (control)",
                          {name: text.replace("\n", "\r\n").encode()}, name, (),
                          accept=f"family: '{doc['family']}'"))
    return cases


def test_bytes_that_are_not_utf8_yaml(tmp_path: Path) -> None:
    run_all(bytes_cases(), tmp_path)


# --- class: file paths colliding in the cache ------------------------------------------------

RESERVED = [".part", ".verified", ".PART", ".Verified", ".range.part"]


def with_extra_file(doc: dict[str, Any], m: int, where: str, path: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    model = doc["models"][m]
    target = model["tokenizer"] if where == "tokenizer" else model["variants"][int(where)]
    target["files"].append({"path": path, "sha256": SHA, "size": 1})
    return doc


def collision_cases() -> list[Case]:
    cases = []
    for name, doc in BASE.items():
        for m, model in enumerate(doc["models"]):
            sets = ["tokenizer", *[str(v) for v in range(len(model["variants"]))]]
            paths = [f["path"] for s in [model["tokenizer"], *model["variants"]] for f in s["files"]]
            folders = sorted({p.rsplit("/", 1)[0] for p in paths if "/" in p})
            added: list[str] = []
            for p in paths:
                added += [p.upper(), p.capitalize(), p.swapcase(), p[:-1] + p[-1].upper()]
                added += [p + suffix for suffix in RESERVED]
                added += [p + "/inner.bin", p.upper() + "/inner.bin"]
            for folder in folders:
                added += [folder, folder.upper(), folder + ".part/x.bin"]
            added += ["extra.part", "extra.verified", "dir.part/x.bin", "x.verified/y.bin"]
            for i, path in enumerate(added):
                where = sets[i % len(sets)]
                text = dump(with_extra_file(doc, m, where, path))
                cases.append(refuse("collisions", f"{name}:models[{m}] + {where}:{path}", name,
                                    text, f"'{path}'"))
            for path in ["extra/new.bin", "part/new.bin", "a.partial", "verified.bin"]:
                text = dump(with_extra_file(doc, m, sets[-1], path))
                cases.append(Case("collisions", f"{name}:models[{m}] + {path} (control)",
                                  {name: text.encode()}, name, (), accept=f"path: '{path}'"))
            # A second model in the same Hub repository and revision shares the cache folder:
            # the same files are fine, files that differ in content or only by case are not.
            twin = copy.deepcopy(model)
            twin["id"] = model["id"] + "_twin"
            text = dump({**doc, "models": [*doc["models"], twin]})
            cases.append(Case("collisions", f"{name}:models[{m}] identical twin (control)",
                              {name: text.encode()}, name, (), accept=f"{twin['id']}: {{"))
            twin_pte = twin["variants"][0]["files"][0]
            twin_pte["path"] = twin_pte["path"].upper()
            text = dump({**doc, "models": [*doc["models"], twin]})
            cases.append(refuse("collisions", f"{name}:models[{m}] twin by case", name, text,
                                f"'{twin_pte['path']}'"))
            twin_pte["path"] = model["variants"][0]["files"][0]["path"]
            twin_pte["sha256"] = "cd" * 32
            text = dump({**doc, "models": [*doc["models"], twin]})
            cases.append(refuse("collisions", f"{name}:models[{m}] twin other sha", name, text,
                                f"'{twin_pte['path']}'"))
    return cases


def test_file_paths_colliding_in_the_cache(tmp_path: Path) -> None:
    run_all(collision_cases(), tmp_path)


# --- class: special files in place of a family file (subprocess: a reader may block) ---------


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


SOCKETS: list[socket.socket] = []


def _bind_socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    SOCKETS.append(sock)


SPECIAL: list[tuple[str, Callable[[Path], None], str]] = [
    ("FIFO", lambda p: os.mkfifo(p), "not a regular file"),
    ("directory", lambda p: p.mkdir(), "not a regular file"),
    ("link to /dev/zero", lambda p: p.symlink_to("/dev/zero"), "not a regular file"),
    ("link to /dev/urandom", lambda p: p.symlink_to("/dev/urandom"), "not a regular file"),
    ("dangling link", lambda p: p.symlink_to(p.parent / "nowhere"), "cannot open"),
    ("link loop", lambda p: p.symlink_to(p), "cannot open"),
    ("socket", _bind_socket, "cannot open"),
]


def test_special_files_in_place_of_a_family_file(tmp_path: Path) -> None:
    running = []
    for label, make, cause in SPECIAL:
        reg_dir = tmp_path / label.replace(" ", "_").replace("/", "_") / "r"
        reg_dir.mkdir(parents=True)
        for name in REAL:
            (reg_dir / name).write_text(dump(BASE[name]))
        make(reg_dir / "zz.yaml")
        proc = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "tools" / "gen_registry.py"), "--registry-dir",
             str(reg_dir), "--package-dir", str(reg_dir.parent / "package")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT,
            preexec_fn=_limit_memory,
        )
        running.append((label, cause, proc))
    for label, cause, proc in running:
        case = Case("special files", label, {}, "zz.yaml", (cause,))
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            LEDGER.record(case.cls, label, HANG, "no answer in 30 s")
            continue
        if proc.returncode < 0:
            LEDGER.record(case.cls, label, CRASH, f"killed by signal {-proc.returncode}")
            continue
        outcome, detail = classify_refusal(case, proc.returncode, stderr.decode(errors="replace"))
        LEDGER.record(case.cls, label, outcome, detail)
    for sock in SOCKETS:
        sock.close()

"""YAML for hand-written declarations: YAML 1.2 core, bounded, and nothing a reader misreads.

PyYAML implements YAML 1.1, where ``010`` is 8, ``1:30`` is 90, ``on`` is true and ``<<``
merges mappings; YAML 1.2 (what other tools and editors follow) reads all of those differently.
This module parses with PyYAML (libyaml when present) and builds the values itself from the event
stream, so that:

- plain scalars resolve by the YAML 1.2 core schema, and a plain scalar that YAML 1.1 reads
  differently is refused (quoting it makes it text); integers are plain decimal only;
- numbers are finite and integers fit JavaScript's exact range (every value ends up in
  TypeScript or JSON);
- a key written twice, a key that is not text, an explicit tag other than ``!!str``, ``!!map``
  or ``!!seq``, and a second document are refused;
- nesting depth, the text of one value and the count of values once aliases are expanded are
  bounded (an alias bomb is refused, not expanded);
- files are read as regular files only, without blocking, up to a size cap, as UTF-8.

Every refusal is a ``StrictYamlError`` (a ``yaml.YAMLError``) naming the field and the line.
"""

from __future__ import annotations

import functools
import math
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_VALUES = 10_000
MAX_TEXT = 4096
MAX_SAFE_INTEGER = 2**53 - 1

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"

# The YAML 1.2 core schema's resolution of plain scalars (yaml.org/spec/1.2.2, 10.3.2).
_CORE = [
    (_NULL, re.compile(r"~|null|Null|NULL|")),
    (_BOOL, re.compile(r"true|True|TRUE|false|False|FALSE")),
    (_INT, re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")),
    (
        _FLOAT,
        re.compile(
            r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
        ),
    ),
]
_DECIMAL = re.compile(r"[-+]?(0|[1-9][0-9]*)")
_KINDS = {_NULL: "null", _BOOL: "a boolean", _INT: "an integer", _FLOAT: "a number", _STR: "text"}
_YAML11 = yaml.resolver.Resolver()

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _tag(tag: str) -> str:
    return tag.replace("tag:yaml.org,2002:", "!!")


class StrictYamlError(yaml.YAMLError):
    """A document this loader refuses: ``field``, the problem, and where it is.

    ``invalid`` marks what the YAML spec itself forbids (a syntax error, a repeated key); the
    rest is valid YAML that these files do not allow.
    """

    def __init__(
        self, problem: str, field: str = "", line: int | None = None, column: int | None = None,
        invalid: bool = False,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.field = field
        self.line = line
        self.column = column
        self.invalid = invalid

    def __str__(self) -> str:
        where = f" (line {self.line}, column {self.column})" if self.line is not None else ""
        located = f"{self.field}: " if self.field else ""
        return f"{located}{self.problem}{where}"


class FileReadError(Exception):
    """A declaration file that cannot be read as text: not a regular file, too large, not UTF-8."""


def field_path(parts: Iterable[str | int]) -> str:
    """``models[0].hf.revision`` for the parts ``("models", 0, "hf", "revision")``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def _kind_of(mode: int) -> str:
    for test, kind in [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]:
        if test(mode):
            return kind
    return "a special file"


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes``.

    Opened without blocking (a FIFO cannot stall it) and checked on the descriptor (what is read
    is what was checked); ``FileReadError`` otherwise.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileReadError(f"cannot open: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileReadError(f"not a regular file but {_kind_of(mode)}; only regular files are read")
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 16, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise FileReadError(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise FileReadError(f"larger than {max_bytes} bytes, the most a file here may be")
    return b"".join(chunks)


def read_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of ``path``: a regular UTF-8 file (a leading BOM dropped); ``FileReadError``."""
    data = read_regular(path, max_bytes)
    if b"\0" in data:  # valid UTF-8, but what a UTF-16 or binary file looks like
        at = data.index(b"\0")
        line = data.count(b"\n", 0, at) + 1
        column = at - (data.rfind(b"\n", 0, at) + 1) + 1
        raise FileReadError(
            f"not UTF-8 text (a NUL byte at line {line}, column {column}: UTF-16 or binary?); "
            "save it as UTF-8"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise FileReadError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, column "
            f"{column}); save it as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


@functools.lru_cache(maxsize=4096)
def _resolve(text: str) -> tuple[str, str]:
    """The tags a plain scalar gets from YAML 1.2 core and from YAML 1.1 (PyYAML)."""
    tag = next((t for t, pattern in _CORE if pattern.fullmatch(text)), _STR)
    return tag, _YAML11.resolve(yaml.ScalarNode, text, (True, False))


@dataclass
class _Node:
    """A collection being built: its value, where it is, and its size with aliases expanded."""

    value: Any
    path: tuple[str | int, ...]
    anchor: str | None
    size: int = 1
    key: Any = None
    has_key: bool = False


class _Builder:
    def __init__(self) -> None:
        self.stack: list[_Node] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.values = 0
        self.documents = 0
        self.result: Any = None

    def refuse(self, problem: str, mark: Any, path: tuple[str | int, ...] | None = None,
               invalid: bool = False) -> StrictYamlError:
        where = self.here() if path is None else path
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        return StrictYamlError(problem, field_path(where), line, column, invalid)

    def here(self) -> tuple[str | int, ...]:
        """The path of the next value: a mapping's own path while it waits for a key."""
        if not self.stack:
            return ()
        top = self.stack[-1]
        if isinstance(top.value, list):
            return (*top.path, len(top.value))
        return (*top.path, top.key) if top.has_key else top.path

    def awaiting_key(self) -> bool:
        return bool(self.stack) and isinstance(self.stack[-1].value, dict) and not self.stack[-1].has_key

    def feed(self, event: yaml.Event) -> None:
        mark = event.start_mark
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise self.refuse("a second YAML document: a file holds exactly one", mark, ())
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in self.anchors:
                raise self.refuse(
                    f"alias *{event.anchor} has no complete anchor &{event.anchor} before it "
                    "(undefined, or inside its own anchor)", mark)
            value, size = self.anchors[event.anchor]
            self.add(value, size, mark, None, counted=False)
        elif isinstance(event, yaml.ScalarEvent):
            self.add(self.scalar(event), 1, mark, event.anchor, counted=False)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            mapping = isinstance(event, yaml.MappingStartEvent)
            kind = "mapping" if mapping else "sequence"
            if self.awaiting_key():
                raise self.refuse(f"a key must be text, not a {kind}", mark)
            if event.tag not in (None, "!", _MAP if mapping else _SEQ):
                raise self.refuse(f"the tag {_tag(event.tag)!r} is not allowed here (only "
                                  "!!str, !!map and !!seq are); remove it", mark)
            if len(self.stack) >= MAX_DEPTH:
                raise self.refuse(f"nested deeper than {MAX_DEPTH} levels", mark)
            self.count(1, mark)
            self.stack.append(_Node({} if mapping else [], self.here(), event.anchor))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            node = self.stack.pop()
            self.add(node.value, node.size, mark, node.anchor, counted=True)

    def count(self, size: int, mark: Any) -> None:
        self.values += size
        if self.values > MAX_VALUES:
            raise self.refuse(
                f"the document holds more than {MAX_VALUES} values once its aliases are expanded "
                "(an alias bomb?); write the values out", mark)

    def add(self, value: Any, size: int, mark: Any, anchor: str | None, counted: bool) -> None:
        if not counted:
            self.count(size, mark)
        if anchor is not None:
            self.anchors[anchor] = (value, size)
        if not self.stack:
            self.result = value
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.value, list):
            top.value.append(value)
        elif not top.has_key:
            if not isinstance(value, str):
                kind = "a mapping" if isinstance(value, dict) else (
                    "a sequence" if isinstance(value, list) else repr(value))
                raise self.refuse(f"a key must be text, not {kind} (quote it)", mark)
            if value in top.value:
                raise self.refuse(
                    f"duplicate key {value!r} (each key may appear once per mapping)", mark,
                    invalid=True)
            top.key, top.has_key = value, True
        else:
            top.value[top.key] = value
            top.key, top.has_key = None, False

    def scalar(self, event: yaml.ScalarEvent) -> Any:
        text = event.value
        mark = event.start_mark
        if len(text) > MAX_TEXT:
            raise self.refuse(f"a value of {len(text)} characters; at most {MAX_TEXT} are "
                              "allowed", mark)
        if event.tag in ("!", _STR) or (event.tag is None and not event.implicit[0]):
            return text  # quoted, a block scalar, or tagged as text
        if event.tag is not None:
            raise self.refuse(f"the tag {_tag(event.tag)!r} is not allowed here (only !!str, "
                              "!!map and !!seq are); remove it", mark)
        tag, tag11 = _resolve(text)
        if tag != tag11:
            kind11 = _KINDS.get(tag11, f"a {tag11.rsplit(':', 1)[-1]}")
            raise self.refuse(
                f"{text!r} is {kind11} to YAML 1.1 readers but {_KINDS[tag]} to YAML 1.2 ones: "
                "quote it if it is text, or write a plain decimal number, true or false", mark)
        if tag == _STR:
            return text
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return text.lower() == "true"
        if tag == _INT:
            if not _DECIMAL.fullmatch(text):
                raise self.refuse(f"{text!r}: write integers in plain decimal (no leading zero, "
                                  "no 0x or 0o prefix)", mark)
            # Length first: int() of thousands of digits is slow, and refused past 4300.
            if len(text.lstrip("+-")) > 16 or abs(int(text)) > MAX_SAFE_INTEGER:
                raise self.refuse(f"{text} is beyond 2^53-1, the largest integer JavaScript "
                                  "represents exactly", mark)
            return int(text)
        if text.lstrip("+-").lower() in (".inf", ".nan"):
            raise self.refuse(f"{text!r} is not a finite number", mark)
        real = float(text)
        if not math.isfinite(real):
            raise self.refuse(f"{text!r} is not a finite number", mark)
        return real


def _one_line(exc: yaml.YAMLError, text: str) -> StrictYamlError:
    """A PyYAML error as one line: its problem and line instead of its multi-line report."""
    if isinstance(exc, yaml.MarkedYAMLError):
        problem = exc.problem or exc.context or "not valid YAML"
        if exc.context and exc.problem:
            problem = f"{exc.problem} ({exc.context})"
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        return StrictYamlError(" ".join(problem.split()), "", line, column, invalid=True)
    position = getattr(exc, "position", None)
    reason = getattr(exc, "reason", None)
    if isinstance(position, int) and reason:
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        character = getattr(exc, "character", "")
        what = f"character {character!r}: " if isinstance(character, str) and character else ""
        return StrictYamlError(f"{what}{reason}", "", line, column, invalid=True)
    return StrictYamlError(" ".join(str(exc).split()), "", invalid=True)


def load(text: str) -> Any:
    """Parse ``text`` (one document); ``StrictYamlError`` naming the field and line otherwise."""
    builder = _Builder()
    try:
        for event in yaml.parse(text, Loader=_Loader):
            builder.feed(event)
    except StrictYamlError:
        raise
    except yaml.YAMLError as exc:
        raise _one_line(exc, text) from None
    except (UnicodeError, ValueError) as exc:  # text PyYAML cannot take (lone surrogates)
        raise StrictYamlError(f"cannot be parsed: {exc}", invalid=True) from None
    return builder.result

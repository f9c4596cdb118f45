"""The sampler's options and their ranges (``cpp/runner/sampler_options.yaml``), declared once
for the C++ range check and TypeScript's. ``codegen`` writes both from what this loads."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rne_tools import strict_yaml
from rne_tools.errors import RegistryError
from rne_tools.paths import PACKAGE_DIR

SAMPLER_OPTIONS_FILE = PACKAGE_DIR / "cpp" / "runner" / "sampler_options.yaml"

_TYPES = ("number", "integer")
_BOUNDS = ("minimum", "exclusive_minimum", "maximum", "exclusive_maximum")
_KEYS = {"type", "off_value", "off_means", *_BOUNDS}
_FIELD = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*\Z")


@dataclass(frozen=True)
class SamplerOption:
    field: str  # the SamplerConfig field (top_p)
    integer: bool
    low: float  # -inf: no lower bound
    low_inclusive: bool
    high: float  # +inf: no upper bound
    high_inclusive: bool
    off: float
    off_means: str

    @property
    def js_name(self) -> str:
        """TypeScript's name: the field in camelCase (top_p: topP)."""
        head, *rest = self.field.split("_")
        return head + "".join(part.capitalize() for part in rest)

    @property
    def range_text(self) -> str:
        """The range as the errors say it: ``>= 0``, ``> 0``, ``in (0, 1]``."""
        if math.isinf(self.high):
            return f"{'>=' if self.low_inclusive else '>'} {_number_text(self.low)}"
        if math.isinf(self.low):
            return f"{'<=' if self.high_inclusive else '<'} {_number_text(self.high)}"
        low, high = _number_text(self.low), _number_text(self.high)
        return f"in {'[' if self.low_inclusive else '('}{low}, {high}{']' if self.high_inclusive else ')'}"

    @property
    def off_text(self) -> str:
        """What the off value does, as the errors say it: ``1 = off``, ``0 = greedy``."""
        return f"{_number_text(self.off)} = {self.off_means}"

    def admits(self, value: float) -> bool:
        if not math.isfinite(value) or (self.integer and value != int(value)):
            return False
        above = value >= self.low if self.low_inclusive else value > self.low
        below = value <= self.high if self.high_inclusive else value < self.high
        return above and below


def _number_text(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _problems(doc: Any, name: str) -> list[str]:
    if not isinstance(doc, dict) or not doc:
        return [f"{name}: must map each SamplerConfig field to its range and off_value"]
    problems = []
    for field, spec in doc.items():
        where = f"{name}: {field}"
        if not _FIELD.match(field):
            problems.append(f"{where}: not a snake_case SamplerConfig field name")
        if not isinstance(spec, dict):
            problems.append(f"{where}: must be a mapping (type, bounds, off_value)")
            continue
        for key in sorted(set(spec) - _KEYS):
            problems.append(f"{where}.{key}: unknown key (allowed: {', '.join(sorted(_KEYS))})")
        if spec.get("type") not in _TYPES:
            problems.append(f"{where}.type: must be one of {', '.join(_TYPES)}, got {spec.get('type')!r}")
        for key in ("off_value", *_BOUNDS):
            if key in spec and not _is_number(spec[key]):
                problems.append(f"{where}.{key}: must be a number, got {spec[key]!r}")
        if "off_value" not in spec:
            problems.append(f"{where}.off_value: missing (the value that leaves the sampler unchanged)")
        if "off_means" in spec and not (isinstance(spec["off_means"], str) and spec["off_means"].strip()):
            problems.append(f"{where}.off_means: must be a non-empty text")
        for pair in (("minimum", "exclusive_minimum"), ("maximum", "exclusive_maximum")):
            if all(key in spec for key in pair):
                problems.append(f"{where}: give {pair[0]} or {pair[1]}, not both")
    return problems


def _option(field: str, spec: dict[str, Any]) -> SamplerOption:
    low_inclusive = "exclusive_minimum" not in spec
    high_inclusive = "exclusive_maximum" not in spec
    return SamplerOption(
        field=field,
        integer=spec["type"] == "integer",
        low=float(spec.get("minimum", spec.get("exclusive_minimum", -math.inf))),
        low_inclusive=low_inclusive,
        high=float(spec.get("maximum", spec.get("exclusive_maximum", math.inf))),
        high_inclusive=high_inclusive,
        off=float(spec["off_value"]),
        off_means=spec.get("off_means", "off"),
    )


def parse_sampler_options(text: str, source: Path) -> tuple[SamplerOption, ...]:
    """The options declared in ``text`` (the content of ``source``), in the file's order;
    ``RegistryError`` lists every problem."""
    name = source.name
    try:
        doc = strict_yaml.load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"invalid sampler options:\n  - {name}: not valid YAML: {exc}") from None
    problems = _problems(doc, name)
    options = () if problems else tuple(_option(field, spec) for field, spec in doc.items())
    problems += [
        f"{name}: {o.field}.off_value: {_number_text(o.off)} is outside the range ({o.range_text})"
        for o in options
        if not o.admits(o.off)
    ]
    if problems:
        raise RegistryError("invalid sampler options:\n" + "\n".join(f"  - {p}" for p in problems))
    return options


def load_sampler_options(path: Path = SAMPLER_OPTIONS_FILE) -> tuple[SamplerOption, ...]:
    return parse_sampler_options(strict_yaml.read_file(path), path)

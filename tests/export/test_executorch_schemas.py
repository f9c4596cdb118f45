"""The exporter (the pinned executorch wheel) and the runtime built from the locked source must
read and write the same flatbuffers: their ``.fbs`` schemas are compared file by file.

The lock moved the source to a commit other than the wheel's (third-party/executorch.lock.json
says why), so this is what keeps the two in agreement. The MLX schema may differ only by union
members appended at the end of ``OpNode`` on one side, with their tables: old members keep their
union ids, so every program that uses only the shared members reads the same on both sides.
Runs where the source cache exists (tools/build_binaries.py --platform linux --source-mirror).
"""

import re
from pathlib import Path

import pytest

# The schemas a program we ship is written with and read by.
IDENTICAL = (
    "schema/program.fbs",
    "schema/scalar_type.fbs",
    "extension/flat_tensor/serialize/flat_tensor.fbs",
    "backends/xnnpack/serialization/schema.fbs",
    "backends/xnnpack/serialization/runtime_schema.fbs",
    "backends/vulkan/serialization/schema.fbs",
)
MLX_SCHEMA = "backends/mlx/serialization/schema.fbs"
_UNION_RE = re.compile(r"union\s+OpNode\s*\{([^}]*)\}", re.S)
_COMMENT_RE = re.compile(r"//[^\n]*")


def _wheel_root() -> Path:
    import executorch

    return Path(list(executorch.__path__)[0])


def _union_members(text: str) -> list[str]:
    match = _UNION_RE.search(text)
    assert match, "no `union OpNode` in the MLX schema"
    return [m.strip() for m in match.group(1).split(",") if m.strip()]


def _without(text: str, members: list[str]) -> str:
    """``text`` with ``members``' tables removed and the union reduced to the others."""
    for name in members:
        text = re.sub(rf"table\s+{name}\s*\{{[^}}]*\}}\s*", "", text)
    keep = [m for m in _union_members(text) if m not in members]
    return _UNION_RE.sub("union OpNode {\n    " + ",\n    ".join(keep) + "\n}", text)


def compatible_mlx_schemas(a: str, b: str) -> tuple[bool, str]:
    """Whether ``a`` and ``b`` differ only by OpNode members appended at the end of one of them.

    Comments and layout are ignored (neither is part of what a flatbuffer encodes).
    """
    a, b = _COMMENT_RE.sub("", a), _COMMENT_RE.sub("", b)
    ua, ub = _union_members(a), _union_members(b)
    shorter, longer = sorted((ua, ub), key=len)
    if longer[: len(shorter)] != shorter:
        return False, "the OpNode unions disagree before their ends (member ids would shift)"
    extra = longer[len(shorter):]
    if _without(a, extra).split() != _without(b, extra).split():  # layout is not encoded either
        return False, f"beyond the appended members {extra}, the schemas differ"
    return True, f"appended members on one side only: {extra}"


@pytest.mark.executorch_source
@pytest.mark.parametrize("relpath", IDENTICAL)
def test_wheel_schema_equals_source(relpath, executorch_source_dir):
    wheel = (_wheel_root() / relpath).read_text()
    source = (executorch_source_dir / relpath).read_text()
    assert wheel == source, f"{relpath}: the exporter wheel and the locked source disagree"


@pytest.mark.executorch_source
def test_mlx_schema_differs_only_by_appended_members(executorch_source_dir):
    ok, why = compatible_mlx_schemas((_wheel_root() / MLX_SCHEMA).read_text(),
                                     (executorch_source_dir / MLX_SCHEMA).read_text())
    assert ok, why


def test_mlx_compatibility_check_rejects_reordered_or_changed_schemas():
    base = "table A { x: int; }\ntable B { y: int; }\nunion OpNode {\n    A,\n    B\n}\n"
    appended = base.replace("    B\n}", "    B,\n    C\n}") + "table C { z: int; }\n"
    assert compatible_mlx_schemas(base, appended)[0]
    reordered = base.replace("    A,\n    B\n}", "    B,\n    A\n}")
    assert not compatible_mlx_schemas(base, reordered)[0]
    changed_table = appended.replace("x: int", "x: float")
    assert not compatible_mlx_schemas(base, changed_table)[0]

"""Make the executorch wheel's MLX partitioner importable.

The wheel ships ``backends/mlx/serialization/schema.fbs``, its code generator ``generate.py`` and
a ``flatc`` binary, but not the generated Python modules the partitioner imports
(``serialization.mlx_graph_schema``, ``serialization._generated_serializers``,
``serialization._generated.mlx_delegate.*`` and ``mlx._generated_inspector``). We run the
Python-only part of that generator into ``.cache/mlx_schema/<key>/`` (key: hash of the schema,
the generator and the executorch version, so the output is reproducible and regenerated when the
wheel changes) and install an import hook that overlays those files onto the installed package.
Nothing in site-packages is modified.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from rne_tools.errors import ExportError
from rne_tools.paths import CACHE_DIR

_SERIALIZATION = "executorch.backends.mlx.serialization"
_INSPECTOR = "executorch.backends.mlx._generated_inspector"


def _wheel_paths() -> tuple[Path, Path]:
    """(serialization dir of the installed MLX backend, the wheel's flatc)."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise ExportError("executorch is not installed; run scripts/setup.sh.")
    root = Path(next(iter(spec.submodule_search_locations)))
    serialization = root / "backends" / "mlx" / "serialization"
    flatc = root / "data" / "bin" / "flatc"
    for needed in (serialization / "schema.fbs", serialization / "generate.py", flatc):
        if not needed.is_file():
            raise ExportError(
                f"{needed} is missing: this executorch wheel has no MLX backend sources "
                "(executorch 1.5.1 ships them; see tools/constraints.txt)."
            )
    return serialization, flatc


def _cache_key(serialization: Path) -> str:
    h = hashlib.sha256()
    for name in ("schema.fbs", "generate.py", "__init__.py"):
        h.update((serialization / name).read_bytes())
    h.update(importlib.metadata.version("executorch").encode())
    return h.hexdigest()[:16]


def _load_generator(serialization: Path) -> ModuleType:
    """Load generate.py as a private module (importing it normally would need its output)."""
    spec = importlib.util.spec_from_file_location(
        "_rne_mlx_generate", serialization / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _generate(serialization: Path, flatc: Path, out: Path) -> None:
    """Write the generated package overlay into ``out`` (``serialization/`` + the inspector)."""
    gen = _load_generator(serialization)
    pkg = out / "serialization"
    generated = pkg / "_generated"
    generated.mkdir(parents=True)
    # flatc's Python bindings (the C++ half of generate.py is for the runtime build, not us).
    proc = subprocess.run(
        [str(flatc), "--python", "-o", str(generated), str(serialization / "schema.fbs")],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ExportError(f"flatc failed on the MLX schema: {proc.stderr.strip()}")
    gen.GENERATED_DIR = generated
    with contextlib.redirect_stdout(io.StringIO()):  # it reports on stdout
        gen._fixup_flatc_imports()

    schema = gen.parse_fbs(serialization / "schema.fbs")
    (pkg / "mlx_graph_schema.py").write_text(gen.generate_python_schema(schema))
    (pkg / "_generated_serializers.py").write_text(gen.generate_python_serializers(schema))
    (out / "_generated_inspector.py").write_text(gen.generate_inspector(schema))
    names = [t.name for t in schema.tables] + [e.name for e in schema.enums]
    names += [s.name for s in schema.structs] + [u.name for u in schema.unions]
    lines = [
        f"from {_SERIALIZATION}._generated.mlx_delegate.{n} import {n}  # noqa: F401"
        for n in sorted(names)
    ]
    (generated / "__init__.py").write_text("\n".join(lines) + "\n")
    # The package __init__ checks that mlx_graph_schema.py sits next to it: overlay a copy.
    shutil.copyfile(serialization / "__init__.py", pkg / "__init__.py")


def ensure_schema(cache_dir: Path = CACHE_DIR) -> Path:
    """Generate the MLX schema modules into the cache if needed; return their directory."""
    serialization, flatc = _wheel_paths()
    target = cache_dir / "mlx_schema" / _cache_key(serialization)
    if (target / "serialization" / "mlx_graph_schema.py").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        _generate(serialization, flatc, tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process generated it first: theirs is identical
            if not (target / "serialization" / "mlx_graph_schema.py").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return target


class _OverlayFinder(importlib.abc.MetaPathFinder):
    """Resolve the MLX serialization package from the overlay first, then the installed files."""

    def __init__(self, overlay: Path, installed: Path) -> None:
        self.overlay, self.installed = overlay, installed

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201
        if fullname == _SERIALIZATION:
            return importlib.util.spec_from_file_location(
                fullname,
                self.overlay / "serialization" / "__init__.py",
                submodule_search_locations=[
                    str(self.overlay / "serialization"),
                    str(self.installed),
                ],
            )
        if fullname == _INSPECTOR:
            return importlib.util.spec_from_file_location(
                fullname, self.overlay / "_generated_inspector.py"
            )
        return None


def install(cache_dir: Path = CACHE_DIR) -> None:
    """Make ``executorch.backends.mlx`` (partitioner included) importable. Idempotent."""
    if any(isinstance(f, _OverlayFinder) for f in sys.meta_path):
        return
    serialization, _ = _wheel_paths()
    overlay = ensure_schema(cache_dir)
    stale = [m for m in sys.modules if m.startswith(_SERIALIZATION)]
    for name in stale:  # a failed import attempt may have left a half-initialised module
        del sys.modules[name]
    sys.meta_path.insert(0, _OverlayFinder(overlay, serialization))

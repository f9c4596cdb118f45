"""Export LLMs to ExecuTorch ``.pte`` files that follow the contract in ``shared/DESIGN.md``.

- ``export_llm``: export + verify one variant into a directory (``tools/export_model.py``).
- ``cached_export``: the same, reusing an identical earlier export under ``~/.cache/rne/exports``.
- ``backends``: the pluggable backends (``xnnpack`` here).
"""

from rne_tools.export.cache import cached_export
from rne_tools.export.pipeline import ExportResult, export_llm, export_stem

__all__ = ["ExportResult", "cached_export", "export_llm", "export_stem"]

"""Export LLMs to ExecuTorch ``.pte`` files that follow the contract in ``docs/design.md``.

- ``plan_export``: resolve and validate a request once into an ``ExportPlan``.
- ``run_export`` / ``export_llm``: export + verify one plan (or request) into a directory
  (``tools/export_model.py``).
- ``run_cached_export`` / ``cached_export``: the same, reusing an identical earlier export under
  ``~/.cache/rne/exports``.
- ``backends``: the pluggable backends (xnnpack, vulkan, mlx).
"""

from rne_tools.export.cache import cached_export, run_cached_export
from rne_tools.export.pipeline import ExportResult, export_llm, run_export
from rne_tools.export.plan import ExportPlan, plan_export

__all__ = [
    "ExportPlan",
    "ExportResult",
    "cached_export",
    "export_llm",
    "plan_export",
    "run_cached_export",
    "run_export",
]

"""Checks that answer "is this .pte right?", below the export pipeline that runs some of them.

- ``eager``: the eager reference model of an export plan and the schedules it is run on.
- ``transform``: a backend's source rewrite checked on an eager probe (run in its ``transform``).
- ``delegation``: what a lowered program leaves outside its delegates.
- ``verify``: the program on a runtime against the eager model (every export runs it).
- ``runner`` / ``cpp_runtime``: the ExecuTorch Python runtime's runner, and our C++ runner on
  the source-built runtime, that execute a program.
- ``parity``: every forward of a program on our C++ runner against its eager model.
- ``quality``: top-1 agreement of a quantized program with its fp32 counterpart.

Nothing here imports the pipeline or the export cache; the checks that need the export's
inputs take its ``ExportPlan``.
"""

"""Python reference runner for exported LLM ``.pte`` files on the ExecuTorch Python runtime.

It follows the runner contract of ``shared/DESIGN.md`` exactly (chunked prefill in steps of the
chunk size read from the method metadata, then T=1 decode) so that what passes here is what the
C++ runner is expected to reproduce.
"""

from rne_tools.runtime.runner import GenerationResult, PteInfo, PteRunner

__all__ = ["GenerationResult", "PteInfo", "PteRunner"]

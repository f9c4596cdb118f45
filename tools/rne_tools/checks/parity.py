"""Execution parity: an export run by our C++ runner (``cpp_runtime``) against its eager model.

Every forward of a token sequence fed in chunks is compared with the eager model the export was
verified against (``eager.eager_model`` of its plan: transformed and quantized the same way). A
backend that computes in a lower precision (Vulkan's fp16, MLX's bf16) is compared with that
model in fp32, beside how far the eager model run in the backend's precision moves the same
logits. Programs with an fp16 KV cache are compared with the same program on ExecuTorch's Python
runtime instead (``reference_runtime_logits``). Used by ``tests/parity/test_execution_parity.py``,
``tests/runner/test_cpp_runner.py`` and ``tools/benchmarks/e2b_parity.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from rne_tools.checks import cpp_runtime
from rne_tools.checks.eager import chunked_logits, eager_model, precision_pair

if TYPE_CHECKING:
    from rne_tools.export.plan import ExportPlan


def reference_runtime_logits(pte: Path, tokens: Sequence[int],
                             chunks: Sequence[int]) -> np.ndarray:
    """Logits ``[len(chunks), vocab]`` of the same program on ExecuTorch's Python runtime (the
    wheel's kernels): the reference for a program whose own rounding (an fp16 KV cache) eager
    PyTorch does not reproduce op for op."""
    from rne_tools.checks.runner import PteRunner

    runner, rows, pos = PteRunner(pte), [], 0
    for n in chunks:
        rows.append(runner.forward(tokens[pos:pos + n], pos)[0].float().numpy())
        pos += n
    return np.stack(rows)


def random_tokens(vocab: int, n: int, seed: int = 7) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n,), generator=g).tolist()


@dataclass(frozen=True)
class Parity:
    runtime: np.ndarray  # [forwards, vocab], our runner
    eager: np.ndarray  # the reference: eager in fp32 for low-precision backends, or another runtime
    # How far the eager model in the backend's precision moves the reference (max |dlogit|);
    # None for backends that compute in the eager graph's precision.
    precision_drift: float | None

    @property
    def diff(self) -> np.ndarray:
        """max |runtime - eager| per forward."""
        return np.abs(self.runtime - self.eager).max(axis=-1)

    @property
    def agreement(self) -> np.ndarray:
        return self.runtime.argmax(-1) == self.eager.argmax(-1)

    def decisive(self, bound: float) -> np.ndarray:
        """Forwards whose reference top-1/top-2 margin exceeds ``2 * bound``: with every logit
        within ``bound`` of the reference, only closer calls may flip the greedy token."""
        top2 = np.sort(self.eager, axis=-1)[:, -2:]
        return (top2[:, 1] - top2[:, 0]) > 2 * bound


def compare(pte: Path, plan: ExportPlan, tokens: Sequence[int],
            chunks: Sequence[int]) -> Parity:
    """Run ``plan``'s program at ``pte`` through our runner and its eager model on ``tokens`` fed
    in ``chunks``."""
    runtime = cpp_runtime.forward_logits(pte, tokens, chunks)
    model = eager_model(plan)
    dtype = plan.backend.compute_dtype
    if dtype is None:
        return Parity(runtime, chunked_logits(model, tokens, chunks), None)
    full, low = precision_pair(model, dtype)
    eager = chunked_logits(full, tokens, chunks)
    drift = float(np.abs(chunked_logits(low, tokens, chunks) - eager).max())
    return Parity(runtime, eager, drift)

"""Eager references: the PyTorch model a program is judged against, and how it is run.

``eager_model`` rebuilds the model an export was verified against from its plan (loaded,
transformed and quantized the same way); ``precision_pair`` gives it in float32 and in a
delegate's lower compute precision; ``greedy`` and ``chunked_logits`` run a model on the
schedules the checks share (chunked prefill, then one token per forward).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from rne_tools.export.plan import ExportPlan

Step = Callable[[Sequence[int], int], torch.Tensor]


def eager_model(plan: ExportPlan) -> nn.Module:
    """The eager model an export of ``plan`` is verified against."""
    transformed = plan.backend.transform(plan.load_model(), plan.options)
    return plan.backend.quantize(transformed.model, plan.options).eval()


def greedy(
    step: Step, prompt: Sequence[int], chunk: int, new_tokens: int
) -> tuple[list[int], list[torch.Tensor]]:
    """Chunked prefill then greedy decode; returns (tokens, logits that chose each token)."""
    logits = None
    for begin in range(0, len(prompt), chunk):
        logits = step(prompt[begin : begin + chunk], begin)
    tokens, chosen_from, pos = [], [], len(prompt)
    for i in range(new_tokens):
        chosen_from.append(logits[0].float())
        tokens.append(int(logits.argmax(-1)[0]))
        if i + 1 < new_tokens:
            logits = step(tokens[-1:], pos)
            pos += 1
    return tokens, chosen_from


def teacher_forced_chunks(prompt_tokens: int, chunk: int, fed_tokens: int) -> list[int]:
    """Forward sizes of a prompt fed in chunks of ``chunk``, then ``fed_tokens`` single tokens."""
    prefill = [min(chunk, prompt_tokens - b) for b in range(0, prompt_tokens, chunk)]
    return prefill + [1] * fed_tokens


def chunked_logits(model: nn.Module, tokens: Sequence[int], chunks: Sequence[int]) -> np.ndarray:
    """Logits ``[len(chunks), vocab]`` of the eager model's forward for each chunk."""
    rows, pos = [], 0
    with torch.no_grad():
        for n in chunks:
            out = model(torch.tensor([list(tokens[pos:pos + n])]), torch.tensor([pos]))
            rows.append(out[0].float().numpy())
            pos += n
    return np.stack(rows)


def _dtype(model: nn.Module) -> torch.dtype:
    return next(p for p in model.parameters() if p.is_floating_point()).dtype


def precision_pair(model: nn.Module, dtype: torch.dtype) -> tuple[nn.Module, nn.Module]:
    """The eager ``model`` in float32 and in ``dtype``, a delegate's compute precision.

    A model already cast to ``dtype`` (MLX's transform: bf16) is the low one as it is, and a
    float32 copy with the same (quantized) weights is the reference; otherwise the reverse.
    """
    if _dtype(model) == dtype:
        return copy.deepcopy(model).to_dtype(torch.float32), model
    return model, copy.deepcopy(model).to(dtype)


def precision_reference(low: nn.Module, prompt: list[int], expected: list[int],
                        chunk: int) -> dict[str, Any]:
    """How often the eager model run in its delegate's precision (``low``, teacher-forced like
    the program) picks the fp32 greedy tokens: the agreement that precision alone allows."""
    chunks = teacher_forced_chunks(len(prompt), chunk, len(expected) - 1)
    rows = chunked_logits(low, list(prompt) + list(expected[:-1]), chunks)
    got = [int(r.argmax(-1)) for r in rows[len(chunks) - len(expected):]]
    matching = sum(a == b for a, b in zip(expected, got, strict=True))
    return {"dtype": str(_dtype(low)).removeprefix("torch."), "matching_tokens": matching,
            "agreement": matching / len(expected)}

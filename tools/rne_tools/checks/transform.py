"""Transform checks: a backend's source rewrite checked on an eager probe.

``check_transform`` runs the same chunked-prefill + decode schedule on the model before and after
the backend's source transforms (custom ops through their reference implementations) and
compares logits and greedy tokens, with a prompt longer than the sliding window and chunks that
straddle the ring buffer's wrap. The GPU backends (MLX, Vulkan), whose runtimes do not exist on
every machine, run it in their ``transform``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from rne_tools.models.layers import reset_caches


def probe_schedule(args: Any, max_context: int, max_chunk: int) -> list[int]:
    """Chunk sizes of a prompt longer than the window (if the model has one) whose chunks
    straddle the ring's wrap; several chunks for a model with flat caches only."""
    window = getattr(args, "sliding_window", None) or max_chunk
    ring = min(max_context, window + max_chunk - 1)
    length = min(max_context - 8, max(2 * ring + 3, window + 3))
    sizes, pos = [], 0
    # Alternate full and partial chunks so the boundaries fall at varying ring offsets.
    for i in range(1000):
        size = min(max_chunk if i % 2 == 0 else max(1, max_chunk // 2 + 1), length - pos)
        if size <= 0:
            break
        sizes.append(size)
        pos += size
    return sizes


@torch.no_grad()
def run_probe(
    model: nn.Module, tokens: torch.Tensor, sizes: list[int], new_tokens: int
) -> tuple[torch.Tensor, list[int]]:
    """Chunked prefill + greedy decode from empty caches; (logits of every call, greedy tokens)."""
    reset_caches(model)
    logits, pos = [], 0
    for size in sizes:
        logits.append(model(tokens[:, pos : pos + size], torch.tensor([pos])))
        pos += size
    generated = []
    for _ in range(new_tokens):
        generated.append(int(logits[-1].argmax(-1)))
        logits.append(model(torch.tensor([[generated[-1]]]), torch.tensor([pos])))
        pos += 1
    reset_caches(model)
    return torch.cat(logits), generated


def check_transform(
    model: nn.Module,
    transform: Callable[[nn.Module], nn.Module],
    atol: float = 1e-3,
    rtol: float = 1e-2,
    new_tokens: int = 8,
) -> tuple[nn.Module, dict[str, Any]]:
    """Apply ``transform`` and check on a probe that logits and greedy tokens are unchanged.

    Greedy tokens must be identical; logits may differ by float32 reordering up to
    ``atol + rtol * max|logit|``. Gemma's attention scale of 1.0 makes softmax sharp, and with
    random weights at real widths that amplifies reordering noise with depth (measured at E2B
    widths: 5e-4 at 5 layers, 5e-3 at 10, logits up to ~5; at all 35 layers the noise grows to
    the logits' own size, 7.9); a wrong transform moves logits by their own magnitude. Returns
    the transformed model and a summary whose ``passed`` says whether the check held
    (``error`` says how not); the export pipeline refuses a failed check when it verifies.
    """
    sizes = probe_schedule(model.args, model.max_context, model.max_chunk)
    length = sum(sizes)
    new_tokens = max(1, min(new_tokens, model.max_context - length))
    g = torch.Generator().manual_seed(4321)
    tokens = torch.randint(0, model.args.vocab_size, (1, length), generator=g)
    before, expected = run_probe(model, tokens, sizes, new_tokens)
    model = transform(model)
    after, got = run_probe(model, tokens, sizes, new_tokens)
    diff = (before.float() - after.float()).abs().max().item()
    tolerance = atol + rtol * before.float().abs().max().item()
    summary: dict[str, Any] = {
        "prompt_tokens": length,
        "chunks": sizes,
        "window": getattr(model.args, "sliding_window", None),
        "decode_tokens": new_tokens,
        "max_abs_logit_diff": diff,
        "tolerance": tolerance,
        "greedy_tokens_match": expected == got,
        "passed": expected == got and diff <= tolerance,
    }
    if not summary["passed"]:
        summary["error"] = (
            f"The source-transformed model disagrees with the original (max |logit diff| "
            f"{diff:.3g}, tolerance {tolerance:.3g}; greedy tokens "
            f"{'match' if expected == got else 'differ'})."
        )
    return model, summary


"""Export verification: the .pte on the ExecuTorch runtime vs the eager model it came from.

Both run the same schedule (chunked prefill in steps of the chunk size the program declares,
then T=1 greedy decode) on a fixed pseudo-random prompt long enough to span several chunks.
The check passes when the greedy tokens are identical; the logit differences are reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rne_tools.export.backends import Backend, ExportOptions

Step = Callable[[Sequence[int], int], torch.Tensor]


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


def verification_prompt(options: ExportOptions, vocab_size: int, new_tokens: int) -> list[int]:
    """A fixed prompt spanning two full chunks and a partial one (within the KV capacity)."""
    length = max(1, min(2 * options.max_chunk + 3, options.max_context - new_tokens))
    g = torch.Generator().manual_seed(1234)
    return torch.randint(0, vocab_size, (length,), generator=g).tolist()


def runtime_available(backend: Backend) -> bool:
    from executorch.runtime import Runtime

    return Runtime.get().backend_registry.is_available(backend.runtime_name)


def verify_program(
    pte_path: Path,
    model: nn.Module,
    options: ExportOptions,
    backend: Backend,
    new_tokens: int = 12,
) -> dict[str, Any]:
    """Compare greedy generation of the program at ``pte_path`` with the eager ``model``.

    Returns the report's ``verification`` section; ``status`` is "passed", "mismatch" or
    "unavailable" (the runtime here cannot run this backend).
    """
    if not runtime_available(backend):
        return {
            "passed": False,
            "status": "unavailable",
            "reason": f"the ExecuTorch Python runtime here has no {backend.runtime_name}",
        }
    from rne_tools.runtime import PteRunner

    runner = PteRunner(pte_path)
    info = runner.info
    new_tokens = max(1, min(new_tokens, options.max_context // 2))
    prompt = verification_prompt(options, info.vocab_size, new_tokens)

    def eager_step(tokens: Sequence[int], pos: int) -> torch.Tensor:
        with torch.no_grad():
            return model(torch.tensor([list(tokens)]), torch.tensor([pos]))

    expected, eager_logits = greedy(eager_step, prompt, info.max_chunk, new_tokens)
    got, runtime_logits = greedy(runner.forward, prompt, info.max_chunk, new_tokens)
    # Logits are only comparable while both sides have seen the same tokens.
    agree = next(
        (i for i, (a, b) in enumerate(zip(expected, got, strict=True)) if a != b), len(got)
    )
    diffs = [
        (e - r).abs().max().item()
        for e, r in zip(eager_logits[: agree + 1], runtime_logits[: agree + 1], strict=False)
    ]
    result: dict[str, Any] = {
        "passed": expected == got,
        "status": "passed" if expected == got else "mismatch",
        "prompt_tokens": len(prompt),
        "chunk": info.max_chunk,
        "generated_tokens": len(got),
        "matching_tokens": agree,
        "max_abs_logit_diff": max(diffs) if diffs else 0.0,
        "expected_tokens": expected,
        "runtime_tokens": got,
    }
    if expected != got:
        result["error"] = (
            f"greedy tokens diverge at step {agree} of {len(got)} "
            f"(eager {expected[agree]}, runtime {got[agree]}; max |logit diff| {result['max_abs_logit_diff']:.4g})"
        )
    return result

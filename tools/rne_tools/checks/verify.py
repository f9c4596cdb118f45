"""Export verification: the .pte on the ExecuTorch runtime vs the eager model it came from.

Both run the same schedule (chunked prefill in steps of the chunk size the program declares,
then T=1 greedy decode) on a fixed prompt long enough to span several chunks. The check passes
when the program's top-1 token agrees with eager's greedy token at a share of the steps (all of
them for fp32; less for quantized or lower-precision programs, see ``verify_program``); the logit
differences are reported.

For a checkpoint with a tokenizer the prompt is a fixed chat message: a trained model answers it
with clear margins between its top tokens, so a quantized program's small kernel-level
differences (int8 activation rounding) do not flip near-ties the way they do on random tokens,
where a real model's next-token distribution is flat. Random-weight models get random tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from rne_tools.checks import cpp_runtime
from rne_tools.checks.eager import (
    greedy,
    precision_pair,
    precision_reference,
    teacher_forced_chunks,
)

if TYPE_CHECKING:
    from rne_tools.export.backends import Backend
    from rne_tools.export.plan import ExportPlan


VERIFICATION_MESSAGE = (
    "Read this note and answer the question after it. The town library opens at nine in the "
    "morning and closes at six in the evening, except on Saturdays, when it closes at two. "
    "Children under twelve may borrow up to five books at a time; adults may borrow ten. "
    "Books are due back after three weeks, and each book can be renewed twice online or at "
    "the front desk. The reading room on the second floor is quiet and has a large window "
    "that looks over the river. Every Thursday afternoon a volunteer reads stories to young "
    "children in the garden, unless it rains, in which case the readings move indoors to the "
    "hall next to the entrance. Question: how many books may an adult borrow at a time?"
)


def verification_prompt(
    plan: ExportPlan, vocab_size: int, new_tokens: int
) -> tuple[list[int], str]:
    """A fixed prompt spanning several chunks within the KV capacity; returns (ids, kind)."""
    options, checkpoint_dir = plan.options, plan.source.checkpoint
    room = max(1, options.max_context - new_tokens)
    if checkpoint_dir is not None and (Path(checkpoint_dir) / "tokenizer.json").is_file():
        from rne_tools.runtime.text import ChatTokenizer

        ids = ChatTokenizer(checkpoint_dir).user_prompt_ids(VERIFICATION_MESSAGE)
        return ids[-room:], "chat"
    length = min(2 * options.max_chunk + 3, room)
    g = torch.Generator().manual_seed(1234)
    return torch.randint(0, vocab_size, (length,), generator=g).tolist(), "random"


def runtime_available(backend: Backend) -> bool:
    from executorch.runtime import Runtime

    return Runtime.get().backend_registry.is_available(backend.runtime_name)


# Share of greedy steps the program's top-1 token must agree with eager's, fed the same tokens.
# Float programs must agree everywhere. Quantized ones compute int8 dynamic activations in
# XNNPACK's kernels, which round differently from torchao's eager reference: measured on the
# real SmolLM2 8da4w, they agree at 21 of 24 teacher-forced steps (max |logit diff| 2.9 over 49k
# logits) while a wrong program (other weights, positions or cache) agrees almost nowhere.
AGREEMENT_REQUIRED = {"fp32": 1.0}
QUANTIZED_AGREEMENT_REQUIRED = 0.75
# A delegate that computes in a lower precision (Vulkan's fp16, MLX's bf16) is judged against
# the eager model in float32, the math it approximates: it cannot agree with those tokens more
# often than the eager model itself does when run in that precision: on
# a random-weight model whose top tokens are near-ties, fp16 alone flips a third of them (tiny
# Gemma 4 8da4w: eager in fp16 agrees at 11 of 18 steps, and so does Vulkan). Such a program must
# agree at least as often as that reference, less this share of the steps for the rounding the two
# do differently; it never needs more than the table above, nor less than the floor (below it a
# wrong program's chance agreement could pass).
PRECISION_SLACK = 0.125
AGREEMENT_FLOOR = 0.25


def verify_program(
    pte_path: Path, model: nn.Module, plan: ExportPlan, new_tokens: int = 24
) -> dict[str, Any]:
    """Compare the greedy tokens of ``plan``'s program at ``pte_path`` with the eager ``model``'s.

    Eager generates greedily; the program is fed the same prompt and tokens (teacher forcing),
    and at each step its top-1 token is compared with eager's. The program runs in the Python
    runtime (the wheel) where it has the backend, else in our C++ runner on the source-built
    runtime (``cpp_runtime``, ``build/linux``) where that build has it. Returns the report's
    ``verification`` section; ``status`` is "passed" (Python runtime), "executed" (C++ runner,
    agreeing), "mismatch", or "unavailable" (no runtime here has this backend).
    """
    options, backend = plan.options, plan.backend
    in_python = runtime_available(backend)
    if not in_python and not cpp_runtime.has_backend(options.backend):
        return {
            "passed": False,
            "status": "unavailable",
            "reason": f"the ExecuTorch Python runtime here has no {backend.runtime_name}, and no "
                      "source-built runtime with it exists (tools/build_binaries.py --platform linux)",
        }
    new_tokens = max(1, min(new_tokens, options.max_context // 2))
    low: nn.Module | None = None
    if backend.compute_dtype is not None:
        model, low = precision_pair(model, backend.compute_dtype)
    vocab_size = int(model(torch.zeros(1, 1, dtype=torch.long), torch.tensor([0])).shape[-1])
    prompt, prompt_kind = verification_prompt(plan, vocab_size, new_tokens)

    def eager_step(tokens: Sequence[int], pos: int) -> torch.Tensor:
        with torch.no_grad():
            return model(torch.tensor([list(tokens)]), torch.tensor([pos]))

    expected, eager_logits = greedy(eager_step, prompt, options.max_chunk, new_tokens)
    required = AGREEMENT_REQUIRED.get(options.quantization, QUANTIZED_AGREEMENT_REQUIRED)
    reference: dict[str, Any] = {}
    if low is not None:
        reference = precision_reference(low, prompt, expected, options.max_chunk)
        required = min(required, max(AGREEMENT_FLOOR, reference["agreement"] - PRECISION_SLACK))
    if in_python:
        from rne_tools.checks.runner import PteRunner

        runner = PteRunner(pte_path)
        runtime_logits = [runner.prefill(prompt)]
        for i, token in enumerate(expected[:-1]):
            runtime_logits.append(runner.forward([token], len(prompt) + i))
    else:
        runtime_logits = _cpp_teacher_forced(pte_path, prompt, expected, options.max_chunk)
    got = [int(logits.argmax(-1)[0]) for logits in runtime_logits]
    matching = sum(a == b for a, b in zip(expected, got, strict=True))
    agreement = matching / len(expected)
    passed = agreement >= required
    result: dict[str, Any] = {
        "passed": passed,
        "status": ("passed" if in_python else "executed") if passed else "mismatch",
        "runtime": "python" if in_python else "cpp (source-built)",
        "prompt": prompt_kind,
        "prompt_tokens": len(prompt),
        "chunk": options.max_chunk,
        "generated_tokens": len(expected),
        "matching_tokens": matching,
        "agreement": agreement,
        "required_agreement": required,
        "max_abs_logit_diff": max(
            (e - r[0].float()).abs().max().item()
            for e, r in zip(eager_logits, runtime_logits, strict=True)
        ),
        "expected_tokens": expected,
        "runtime_tokens": got,
    }
    if reference:
        result["precision_reference"] = reference
    if getattr(model, "embeds_width", 0):
        media = _media_check(pte_path, model, options.max_chunk, in_python)
        result["media"] = media
        if media.get("passed") is False and options.quantization == "fp32":
            passed = result["passed"] = False
            result["status"] = "mismatch"
            result["error"] = media["error"]
            return result
    if not passed:
        first = next(i for i, (a, b) in enumerate(zip(expected, got, strict=True)) if a != b)
        result["error"] = (
            f"the program's greedy tokens agree with eager at {matching} of {len(expected)} "
            f"steps (needs {required:.0%}); first difference at step {first} (eager "
            f"{expected[first]}, runtime {got[first]}); max |logit diff| "
            f"{result['max_abs_logit_diff']:.4g}"
            + (f"; the eager model in {reference['dtype']} agrees at {reference['matching_tokens']}"
               if reference else "")
        )
    return result


def _cpp_teacher_forced(pte_path: Path, prompt: list[int], expected: list[int],
                        chunk: int) -> list[torch.Tensor]:
    """The last-position logits after the prompt and after each fed token, from the C++ runner."""
    chunks = teacher_forced_chunks(len(prompt), chunk, len(expected) - 1)
    rows = cpp_runtime.forward_logits(pte_path, list(prompt) + list(expected[:-1]), chunks)
    return [torch.from_numpy(r).unsqueeze(0) for r in rows[len(chunks) - len(expected):]]


# Share of a media check's prompt that holds media tokens, and its length in chunks.
_MEDIA_RUN = 5


def _media_check(pte_path: Path, model: nn.Module, chunk: int, in_python: bool) -> dict[str, Any]:
    """A prompt with runs of media tokens whose rows come from ``embeds``, through the program and
    eager in the same chunks: the last position's logits must agree (argmax; fp32 programs are
    gated on it, others report it). Rows are random at the scale of the text embeddings."""
    if not in_python:
        return {"status": "not run", "reason": "media inputs are checked on the Python runtime"}
    from rne_tools.checks.runner import PteRunner

    g = torch.Generator().manual_seed(4321)
    ids = list(model.args.media_token_ids)
    length = min(2 * chunk + 3, model.max_context // 2)
    tokens = torch.randint(0, min(model.args.vocab_size, 256), (length,), generator=g)
    for i, start in enumerate(range(1, length - 1, 2 * _MEDIA_RUN)):
        tokens[start : start + _MEDIA_RUN] = ids[i % len(ids)]
    every_row = model.tok_embeddings(torch.arange(model.args.vocab_size))
    scale = float((every_row.float() * model.embed_scale).std())
    embeds = torch.randn(1, length, model.args.dim, generator=g) * scale
    runner = PteRunner(pte_path)
    eager = got = None
    for begin in range(0, length, chunk):
        part, rows = tokens[begin : begin + chunk].tolist(), embeds[:, begin : begin + chunk]
        with torch.no_grad():
            eager = model(torch.tensor([part]), torch.tensor([begin]), rows)
        got = runner.forward(part, begin, rows)
    assert eager is not None and got is not None
    diff = float((eager.float() - got.float()).abs().max())
    std = float(eager.float().std())
    agree = int(eager.argmax(-1)[0]) == int(got.argmax(-1)[0])
    media_tokens = sum(int(t) in ids for t in tokens.tolist())
    result = {
        "passed": agree,
        "prompt_tokens": length,
        "media_tokens": media_tokens,
        "max_abs_logit_diff": diff,
        "logit_std": std,
    }
    if not agree:
        result["error"] = (
            f"with media embeddings at {media_tokens} of {length} positions the program's top "
            f"token differs from eager's (max |logit diff| {diff:.4g}, logit std {std:.4g})"
        )
    return result


def with_verify_method_check(
    verification: dict[str, Any], pte_path: Path, model: nn.Module, plan: ExportPlan
) -> dict[str, Any]:
    """``verification`` with the check of the program's ``verify`` method added (``verify_method``).

    ``verify`` must answer what ``forward`` answers: after the prompt is prefilled, ``verify`` is
    fed the next ``verify_tokens`` of eager's greedy answer in one call and ``forward`` the token
    after them (reading what ``verify`` wrote); a second load of the program prefills the same
    prompt and ``forward`` is fed the same tokens one at a time. Each row's top-1
    token must agree with ``forward``'s at the share of steps the main verification required.
    ``forward`` itself was judged against eager by the main verification; judging ``verify``
    against eager too would count ``forward``'s quantization disagreements twice, over few steps.
    Both methods work on one set of caches, so a program whose methods each kept their own fails.
    A failure turns the whole verification into a mismatch.
    """
    if verification.get("status") != "passed":
        return {**verification, "verify_method": {"status": "not run",
                                                  "reason": "needs the Python runtime"}}
    from executorch.runtime import Runtime

    from rne_tools.checks.runner import _load_runtime_ops, load_forward

    options = plan.options
    expected = list(verification["expected_tokens"])
    with torch.no_grad():
        vocab_size = int(model(torch.zeros(1, 1, dtype=torch.long), torch.tensor([0])).shape[-1])
    prompt, _ = verification_prompt(plan, vocab_size, len(expected))
    k = min(options.verify_tokens, len(expected) - 2)
    _load_runtime_ops()

    def prefilled() -> tuple[Any, Any]:
        # A fresh load has fresh caches: forward's own rows are computed in a second one, so no
        # method writes a position before one already written (a ring cache's slots assume not).
        program = Runtime.get().load_program(pte_path)
        forward = load_forward(program, pte_path)
        for start in range(0, len(prompt), options.max_chunk):
            chunk = prompt[start:start + options.max_chunk]
            forward.execute((torch.tensor([chunk]), torch.tensor([start])))
        return program, forward

    def step(forward: Any, token: int, pos: int) -> torch.Tensor:
        return forward.execute((torch.tensor([[token]]), torch.tensor([pos])))[0].reshape(-1)

    pos = len(prompt)
    program, forward = prefilled()
    rows = program.load_method("verify").execute(
        (torch.tensor([expected[:k]]), torch.tensor([pos])))[0][0]
    got_rows = [*rows, step(forward, expected[k], pos + k)]
    _, forward = prefilled()
    want_rows = [step(forward, expected[i], pos + i) for i in range(k + 1)]
    got = [int(r.argmax()) for r in got_rows]
    want = [int(r.argmax()) for r in want_rows]
    matching = sum(a == b for a, b in zip(want, got, strict=True))
    check: dict[str, Any] = {
        "status": "passed",
        "chunk": k,
        "matching_tokens": matching,
        "steps": len(want),
        "agreement": matching / len(want),
        "max_abs_diff": max(float((a - b).abs().max()) for a, b in zip(got_rows, want_rows, strict=True)),
        "forward_tokens": want,
        "runtime_tokens": got,
    }
    if check["agreement"] < verification["required_agreement"]:
        check["status"] = "mismatch"
        error = (
            f"the verify method agrees with forward at {matching} of {len(want)} steps (needs "
            f"{verification['required_agreement']:.0%}; largest logit difference "
            f"{check['max_abs_diff']:.3g}): its rows, or forward reading what it wrote, are wrong"
        )
        return {**verification, "passed": False, "status": "mismatch", "error": error,
                "verify_method": check}
    return {**verification, "verify_method": check}

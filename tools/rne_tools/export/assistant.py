"""Gemma 4's assistant drafter in the variant's program: the ``draft`` method (docs/design.md,
"Speculative decoding").

An export with ``--assistant DIR`` (and ``--verify-tokens``) traces three methods over one set of
KV caches (``share_mutable_buffers``): ``forward`` and ``verify`` also return the normed last
hidden state of the positions they score, and ``draft(token[1, 1], hidden[1, 1, D],
input_pos[1]) -> (token[1], hidden[1, 1, D])`` runs one step of the assistant
(``models.gemma4_assistant``), reading the target's caches where they live: the method only
reads them, and the memory plan places them once for all methods, so nothing is copied per step.

The draft method is traced from the target itself (its ``forward`` patched), so its cache buffers
have the names ``forward``'s have, which is how the memory plan knows they are the same tensors.

XNNPACK only: its full-attention caches are read through ``llama::custom_sdpa`` (a CPU op that
bounds attention by position), its rings through a gather of the window's slots.
"""

from __future__ import annotations

import hashlib
import types
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rne_tools.errors import ExportError
from rne_tools.models import gemma4, gemma4_assistant, layers

# What the other backends would need (docs/design.md): the same three methods on one set of
# caches. Vulkan's delegate owns its caches (one copy per method), MLX keeps them in its own
# graph state; neither shares state across methods here yet (Backend.verify_problem).
NOT_ON = {
    "vulkan": "a Vulkan program keeps its KV caches inside the delegate, one copy per method, so "
              "a draft method could not read what forward and verify wrote; it needs the "
              "delegate to share its cache tensors across methods, and a gather of the ring "
              "slots and an attention over the first p slots in the Vulkan ops",
    "mlx": "an MLX program keeps its caches as graph state of each method; it needs that state "
           "shared across forward, verify and draft (the shared-arena layout XNNPACK programs "
           "use), and a gather of the ring slots in its op set",
}


def checkpoint_digest(directory: Path) -> str:
    """sha256 over the assistant's config.json and weight files (names and bytes): what the
    export cache keys a program with an assistant by."""
    h = hashlib.sha256()
    for path in [directory / "config.json", *sorted(directory.glob("*.safetensors"))]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def check_request(directory: Path | str, backend: str, architecture: str,
                  target_config: dict[str, Any], verify_tokens: int, max_chunk: int) -> str:
    """Refuse an assistant request that cannot work, before any weights load (ExportError
    saying what to change); returns the checkpoint's digest."""
    directory = Path(directory)
    if architecture != "gemma4":
        raise ExportError(
            f"--assistant drafts for Gemma 4 only; this model's architecture is {architecture}. "
            "Use prompt lookup (rne_llm --speculative prompt-lookup) for it."
        )
    if backend != "xnnpack":
        raise ExportError(
            f"--assistant is exported for XNNPACK only: {NOT_ON.get(backend, 'not implemented')}. "
            "Export the xnnpack variant, or this one without --assistant."
        )
    if not verify_tokens:
        raise ExportError(
            "--assistant needs --verify-tokens (e.g. 5): the assistant's drafts are checked by "
            "the verify method."
        )
    if verify_tokens >= max_chunk:
        # The draft reads the window + 1 positions before the round's token from the rings,
        # which keep max_chunk - 1 slots beyond the window: a verify call of max_chunk tokens
        # whose drafts are all rejected would overwrite the oldest of them.
        raise ExportError(
            f"--verify-tokens {verify_tokens} must be below the max chunk ({max_chunk}) with "
            "--assistant: the assistant reads one position more of the sliding caches than the "
            "model does. Lower --verify-tokens or raise --max-chunk."
        )
    if not directory.is_dir():
        raise ExportError(f"Assistant checkpoint directory {directory} does not exist.")
    from rne_tools.checkpoints import read_config
    from rne_tools.errors import CheckpointError

    try:
        args = gemma4_assistant.AssistantArgs.from_hf_config(read_config(directory))
    except CheckpointError as e:
        raise ExportError(f"{directory}: {e}") from e
    target = gemma4.ModelArgs.from_hf_config(target_config)
    if problem := args.target_problem(target):
        raise ExportError(
            f"The assistant in {directory} is for another model: {problem}. Pass the assistant "
            "published for this model (e.g. google/gemma-4-e2b-it-assistant for gemma-4-e2b-it)."
        )
    return checkpoint_digest(directory)


def transform_for_xnnpack(assistant: nn.Module, target: nn.Module) -> nn.Module:
    """XNNPACK's rewrites of the building blocks (as ``xnnpack_ops`` does to the target), the
    sliding attention folded, full attention on the custom op over the in-place caches."""
    from rne_tools.export.backends.xnnpack_ops import (
        FoldedGqaSDPA,
        FourDimRMSNorm,
        MatmulRotateHalf,
        SigmoidGeluTanh,
    )
    from rne_tools.export.transforms import apply_replacements

    apply_replacements(
        assistant,
        {
            layers.RMSNorm: FourDimRMSNorm,
            layers.RotateHalf: MatmulRotateHalf,
            layers.GeluTanh: lambda _: SigmoidGeluTanh(),
            layers.SDPA: lambda s: FoldedGqaSDPA(s) if s.spec.window is not None else s,
        },
    )
    gemma4_assistant.use_in_place_full_caches(assistant, target)
    return assistant


def _draft(self: nn.Module, token: torch.Tensor, hidden: torch.Tensor,
           input_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``draft`` method, bound to the target: one assistant step from the target's token
    embedding of ``token`` and ``hidden``, at position ``input_pos``."""
    embedding = self.tok_embeddings(token) * self.embed_scale
    return self.assistant.propose(embedding, hidden.to(embedding.dtype), input_pos, self)


def trace_draft(target: nn.Module, assistant: nn.Module) -> Any:
    """torch.export of the ``draft`` method: the target with ``assistant`` attached and its
    forward patched, so the cache buffers keep their names."""
    from torch.export import export

    target.assistant = assistant
    target.forward = types.MethodType(_draft, target)
    try:
        layers.reset_caches(target)
        example = (torch.zeros(1, 1, dtype=torch.long),
                   torch.zeros(1, 1, assistant.args.backbone_dim), torch.tensor([1]))
        with torch.no_grad():
            return export(target, example, strict=False)
    finally:
        del target.forward
        del target.assistant


def target_hash(target_config: dict[str, Any]) -> int:
    """The target's config digest as a 48-bit int: ``get_assistant_target``, recorded so a
    separately shipped assistant program can be matched to its model."""
    return int(gemma4_assistant.config_digest(target_config)[:12], 16)


def draft_check(pte_path: Path, target: nn.Module, assistant: nn.Module, prompt: list[int],
                chunk: int, steps: int = 4) -> dict[str, Any]:
    """After the same prompt through ``forward``, the program's ``draft`` steps (fed forward's
    hidden output) against the eager assistant over the eager target: the drafted tokens must
    be equal (greedy, float32 weights of the assistant)."""
    from executorch.runtime import Runtime

    from rne_tools.checks.runner import _load_runtime_ops, load_forward

    _load_runtime_ops()
    program = Runtime.get().load_program(pte_path)
    forward, draft = load_forward(program, pte_path), program.load_method("draft")
    layers.reset_caches(target)
    with torch.no_grad(), gemma4_assistant.returning_hidden(target):
        for start in range(0, len(prompt), chunk):
            piece = torch.tensor([prompt[start:start + chunk]])
            logits, hidden = target(piece, torch.tensor([start]))
            out = forward.execute((piece, torch.tensor([start])))
    pos = torch.tensor([len(prompt)])
    token = logits.argmax(-1).reshape(1, 1)
    runtime_token, runtime_hidden = token, out[1].reshape(1, 1, -1)
    want, got = [], []
    with torch.no_grad():
        hidden = hidden.reshape(1, 1, -1)
        for _ in range(steps):
            embedding = target.tok_embeddings(token) * target.embed_scale
            chosen, hidden = assistant.propose(embedding, hidden, pos, target)
            token = chosen.reshape(1, 1)
            want.append(int(chosen))
            step = draft.execute((runtime_token, runtime_hidden, pos))
            runtime_token, runtime_hidden = step[0].reshape(1, 1), step[1]
            got.append(int(step[0][0]))
    return {"status": "passed" if want == got else "mismatch", "steps": steps,
            "expected_tokens": want, "runtime_tokens": got}

"""``PteRunner``: load an exported LLM, read its contract, prefill in chunks and decode greedily.

The Python reference runner, on the ExecuTorch Python runtime. It follows the runner contract of
``docs/design.md`` exactly (chunked prefill in steps of the chunk size read from the method
metadata, then T=1 decode) so that what passes here is what the C++ runner is expected to
reproduce.
"""

from __future__ import annotations

import ctypes
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rne_tools.errors import VerificationError
from rne_tools.paths import REPO_ROOT

# The runner's own kernels (rne::*, cpp/runner/src/kernels.cpp) built for this Python runtime by
# the host build (tools/build_binaries.py --platform host).
RUNNER_KERNELS = REPO_ROOT / "build" / "host" / "librne_kernels.so"

CONSTANT_METHODS = (
    "get_max_seq_len",
    "get_max_context_len",
    "get_vocab_size",
    "get_bos_id",
    "get_eos_ids",
    "use_kv_cache",
    "enable_dynamic_shape",
    "get_backend",
)


def _load_runtime_ops() -> None:
    """Register the LLM custom ops and quantized kernels with the Python runtime."""
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401
    import executorch.kernels.quantized  # noqa: F401

    _load_runner_kernels()


@functools.cache
def _load_runner_kernels() -> bool:
    """Register the runner's kernels with the Python runtime, where the host build made them."""
    import executorch.runtime  # noqa: F401  (its libexecutorch.so first: one kernel registry)

    if not RUNNER_KERNELS.is_file():
        return False
    library = ctypes.CDLL(str(RUNNER_KERNELS))
    library.rne_register_kernels.restype = ctypes.c_bool
    return bool(library.rne_register_kernels())


def load_forward(program: Any, pte_path: Path) -> Any:
    """``program``'s forward method on the Python runtime; a program calling the runner's own
    kernels where they were not built gets an error that says how to build them."""
    try:
        return program.load_method("forward")
    except RuntimeError as e:
        if _load_runner_kernels():
            raise
        raise VerificationError(
            f"{pte_path.name} cannot be loaded here ({e}). If it calls the runner's own "
            f"kernels (rne::*), build them for this runtime first: {RUNNER_KERNELS} is "
            "missing (.venv/bin/python tools/build_binaries.py --platform host)."
        ) from e


@dataclass(frozen=True)
class PteInfo:
    """What a ``.pte`` declares about itself (the contract's constant methods + metadata)."""

    max_chunk: int  # from forward's input metadata: the declared upper bound of T
    max_context: int
    vocab_size: int
    bos_id: int
    eos_ids: tuple[int, ...]
    backend_code: int
    constants: dict[str, object]


@dataclass
class GenerationResult:
    tokens: list[int]
    prompt_tokens: int
    prefill_seconds: float
    decode_seconds: float
    stopped_at_eos: bool

    @property
    def prefill_tok_s(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def decode_tok_s(self) -> float:
        # The first generated token comes from the prefill logits, the rest from decode steps.
        steps = max(len(self.tokens) - 1, 0)
        return steps / self.decode_seconds if self.decode_seconds else 0.0


class PteRunner:
    """Runs one exported LLM. Not thread-safe; one conversation at a time (KV cache inside)."""

    def __init__(self, pte_path: Path | str) -> None:
        from executorch.runtime import Runtime

        pte_path = Path(pte_path)
        if not pte_path.is_file():
            raise FileNotFoundError(f"{pte_path} does not exist")
        _load_runtime_ops()
        self.path = pte_path
        self._program = Runtime.get().load_program(pte_path)
        missing = {"forward", *CONSTANT_METHODS} - set(self._program.method_names)
        if missing:
            raise VerificationError(
                f"{pte_path} lacks method(s) {', '.join(sorted(missing))} required by the .pte "
                "contract; re-export it with tools/export_model.py."
            )
        self._forward = load_forward(self._program, pte_path)
        self.info = self._read_info()
        meta = self._program.metadata("forward")
        # A decoder with media tokens takes embeds[1, T, width] after the positions.
        self.embeds_width = (
            int(meta.input_tensor_meta(2).sizes()[2]) if meta.num_inputs() > 2 else 0
        )

    def _constant(self, name: str) -> object:
        values = self._program.load_method(name).execute(())
        return values[0] if len(values) == 1 else tuple(values)

    def _read_info(self) -> PteInfo:
        constants = {name: self._constant(name) for name in CONSTANT_METHODS}
        sizes = self._program.metadata("forward").input_tensor_meta(0).sizes()
        eos = constants["get_eos_ids"]
        return PteInfo(
            max_chunk=int(sizes[1]),
            max_context=int(constants["get_max_context_len"]),
            vocab_size=int(constants["get_vocab_size"]),
            bos_id=int(constants["get_bos_id"]),
            eos_ids=tuple(int(e) for e in (eos if isinstance(eos, tuple) else (eos,))),
            backend_code=int(constants["get_backend"]),
            constants=constants,
        )

    def forward(
        self, tokens: Sequence[int], start_pos: int, embeds: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One call of ``forward``: ``len(tokens) <= max_chunk`` tokens at ``start_pos``;
        ``embeds[1, T, width]`` holds the media rows of a program that takes them (zeros if None)."""
        chunk = torch.tensor([list(tokens)], dtype=torch.long)
        inputs: tuple[torch.Tensor, ...] = (chunk, torch.tensor([start_pos], dtype=torch.long))
        if self.embeds_width:
            if embeds is None:
                embeds = torch.zeros(1, len(tokens), self.embeds_width)
            inputs += (embeds.float().contiguous(),)
        elif embeds is not None:
            raise ValueError(f"{self.path.name} takes token ids only, not embeddings")
        return self._forward.execute(inputs)[0]

    def prefill(self, tokens: Sequence[int], start_pos: int = 0) -> torch.Tensor:
        """Feed ``tokens`` in chunks of ``max_chunk``; returns the last position's logits [1, V]."""
        if not tokens:
            raise ValueError("prefill needs at least one token")
        if start_pos + len(tokens) > self.info.max_context:
            raise ValueError(
                f"{len(tokens)} tokens at position {start_pos} exceed the KV capacity "
                f"({self.info.max_context}) of {self.path.name}"
            )
        step = self.info.max_chunk
        logits = None
        for begin in range(0, len(tokens), step):
            logits = self.forward(tokens[begin : begin + step], start_pos + begin)
        return logits

    def generate(
        self,
        prompt: Sequence[int],
        max_new_tokens: int,
        stop_at_eos: bool = True,
        on_token: Callable[[int], None] | None = None,
    ) -> GenerationResult:
        """Greedy generation from position 0. The budget never exceeds the KV capacity left."""
        t0 = time.perf_counter()
        logits = self.prefill(prompt)
        t1 = time.perf_counter()
        budget = min(max_new_tokens, self.info.max_context - len(prompt))
        pos, out, eos_hit = len(prompt), [], False
        for i in range(budget):
            token = int(logits.argmax(-1)[0])
            out.append(token)
            if on_token is not None:
                on_token(token)
            if stop_at_eos and token in self.info.eos_ids:
                eos_hit = True
                break
            if i + 1 < budget:
                logits = self.forward([token], pos)
                pos += 1
        t2 = time.perf_counter()
        return GenerationResult(out, len(prompt), t1 - t0, t2 - t1, eos_hit)

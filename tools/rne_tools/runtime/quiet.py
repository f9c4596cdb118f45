"""Quiet tool output: known library noise is dropped where it starts, real problems still print.

Three sources flood an export or a verification run:
- the ExecuTorch runtime inside the LLM custom ops logs ``No temp allocator provided`` (at error
  level, though the kernel then falls back to malloc and succeeds) once per attention call, and
  its CPU probe logs ``cpuinfo_utils.cpp`` lines. The wheel fixes its log level at compile time
  and its log hook is a C function, so native stderr goes through a filter process that drops
  only the lines ``native_stderr.NATIVE_NOISE`` names (see that module).
- library loggers: torchao warns that its CUDA extensions cannot load on a CPU-only machine, and
  ExecuTorch's Vulkan modules set the root logger to INFO on import, so its partitioner logs
  every node it lowers.
- Python warnings: deprecation notices from torch/torchao/executorch internals, and the
  emitter's note that a mutated buffer (our KV cache) is serialized without contents.

Entry points call ``configure_python_noise()`` once, before importing the libraries, and run
their work inside ``filtered_native_stderr()``. Native writes to file descriptor 2 pass through
the filter process. Python code keeps writing to the terminal directly (tqdm's carriage-return
updates are not held back), except for one case: ExecuTorch's Python bindings route the
runtime's log lines through ``sys.stderr``, so a write that starts a ``[file:line]`` log line is
held until its newline and dropped if it is known noise.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from rne_tools.runtime.native_stderr import is_native_noise

# Loggers whose warnings are noise here, and the level below which they are dropped.
NOISY_LOGGERS: dict[str, int] = {
    "torchao": logging.ERROR,  # "Failed to load ...cutlass/mxfp8.so": CUDA-only extensions
    "torch.utils._pytree": logging.ERROR,  # torchao's Enum register_constant deprecation
}

# Library modules whose deprecation notices are not actionable by a user of the tools.
_LIBRARY_MODULES = r"(torch|torchao|executorch|transformers|huggingface_hub)(\..*)?"

_FILTER_SCRIPT = Path(__file__).with_name("native_stderr.py")


def configure_python_noise() -> None:
    """Silence the known-noisy library loggers and library deprecation warnings."""
    # ExecuTorch's Vulkan modules set the root logger to INFO when imported (and others call
    # basicConfig(level=INFO)), after which the partitioner logs every node it lowers. The level
    # on the root's handler holds whatever a library later does to the logger's own level.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.WARNING)
    for name, level in NOISY_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    for category in (DeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category, module=_LIBRARY_MODULES)
    # The KV cache is a mutated buffer on purpose: its initial contents are never read.
    warnings.filterwarnings(
        "ignore", message=r"Mutation on a buffer in the model is detected", category=UserWarning
    )
    # torch's own pytree deprecation, attributed to copyreg (which unpickles the spec).
    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        category=FutureWarning,
    )


@contextlib.contextmanager
def quiet_library_loggers() -> Iterator[None]:
    """``NOISY_LOGGERS`` held at their levels for the block only, then restored: for library
    code that imports those libraries lazily and runs without ``configure_python_noise`` (a
    helper called from a shell script, not a CLI). Errors still print."""
    saved = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    for name, level in NOISY_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


class _LogLineFilter:
    """``sys.stderr`` inside ``filtered_native_stderr``: drops the noise lines the runtime's
    Python bindings print, passes everything else through.

    The bindings write a log line in pieces (``[``, file, ``:``, line, ``] ``, message, newline)
    and flush after each, so a write that starts with ``[`` is held until its newline, and a
    flush does not release it.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._held = ""

    def write(self, text: str) -> int:
        if not self._held and not text.startswith("["):
            return self._stream.write(text)
        self._held += text
        while "\n" in self._held:
            line, _, self._held = self._held.partition("\n")
            if not is_native_noise(line.encode(errors="replace")):
                self._stream.write(line + "\n")
        if self._held and not self._held.startswith("["):
            self._stream.write(self._held)
            self._held = ""
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        """Write out a line still waiting for its newline, then close the stream."""
        if self._held:
            self._stream.write(self._held)
            self._held = ""
        self._stream.close()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...
        return getattr(self._stream, name)


@contextlib.contextmanager
def filtered_native_stderr() -> Iterator[None]:
    """Within the block, file descriptor 2 goes through the noise filter process."""
    sys.stderr.flush()
    original_fd = os.dup(2)
    python_stderr = sys.stderr
    # -S: no site imports; the filter needs only the standard library.
    process = subprocess.Popen(
        [sys.executable, "-S", str(_FILTER_SCRIPT)], stdin=subprocess.PIPE, stdout=original_fd
    )
    sys.stderr = _LogLineFilter(os.fdopen(os.dup(original_fd), "w", buffering=1))
    os.dup2(process.stdin.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original_fd, 2)
        process.stdin.close()  # the last write end: the filter drains the pipe and exits
        process.wait()
        sys.stderr.close()
        sys.stderr = python_stderr
        os.close(original_fd)

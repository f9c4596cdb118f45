"""Filter for native stderr: drops the known-noise lines, copies every other line unchanged.

Runs as its own process (``python native_stderr.py``, reading the tool's native stderr on
stdin) so that the last lines before a native crash or abort still reach the terminal: the
filter drains the pipe after the tool process has died. Kept free of package imports so that it
starts in milliseconds.
"""

from __future__ import annotations

import re
import sys

# Native stderr lines that carry no information for a user of the tools.
NATIVE_NOISE: tuple[re.Pattern[bytes], ...] = (
    # The custom SDPA kernel asks for a temp allocator the eager/pybind context lacks, then mallocs.
    re.compile(rb"^\[kernel_runtime_context\.h:\d+\] No temp allocator provided\r?$"),
    # ExecuTorch's CPU probe reporting ARM-only files it could not read on x86.
    re.compile(rb"^\[cpuinfo_utils\.cpp:\d+\] "),
)


def is_native_noise(line: bytes) -> bool:
    """True when a native stderr line (without its newline) is known noise."""
    return any(pattern.search(line) for pattern in NATIVE_NOISE)


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not is_native_noise(line.rstrip(b"\n")):
            out.write(line)
            out.flush()


if __name__ == "__main__":
    main()

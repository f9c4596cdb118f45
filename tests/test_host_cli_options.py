"""The host CLIs' one option parser (cpp/host/cli_options.h), through rne_bench: a bad command
line is a clear error on stderr with exit status 1, and nothing runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.mark.parametrize(("argv", "message"), [
    (["--frobnicate"], "unknown option --frobnicate (options: --model --prompt-tokens"),
    (["--repeat"], "--repeat needs a value"),
    (["--repeat", "5x"], "--repeat: takes an integer, got '5x'"),
    (["--sampler-vocab", ""], "--sampler-vocab: takes an integer, got ''"),
])
def test_bad_command_lines_are_clear_errors(rne_bench: Path, argv: list[str], message: str) -> None:
    done = subprocess.run([rne_bench, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""
    assert f"rne_bench: {message}" in done.stderr


def test_options_are_applied(rne_bench: Path) -> None:
    done = subprocess.run([rne_bench, "--sampler-vocab", "300", "--iterations", "2"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert '"vocab_size":300' in done.stdout and '"iterations":2' in done.stdout

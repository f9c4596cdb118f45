"""The host CLIs' one option parser (cpp/host/cli_options.h), through rne_bench and rne_llm's
generation flags: a bad command line is a clear error on stderr with exit status 1, and nothing
runs."""

from __future__ import annotations

import re
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


SEAM_TS = Path(__file__).resolve().parents[2] / "packages/react-native-executorch/src/native/seam.ts"


def _sampling_options() -> list[str]:
    """The fields of seam.ts's SamplingOptions: the sampler options an app can set."""
    body = re.search(r"export interface SamplingOptions \{(.*?)\n\}", SEAM_TS.read_text(), re.S)
    assert body, "SamplingOptions not found in seam.ts"
    return re.findall(r"readonly (\w+)\??:", body.group(1))


def test_every_sampler_option_is_an_rne_llm_flag(rne_llm: Path) -> None:
    """rne_llm reads its generation flags through the seam's option table, spelled in kebab
    case: a sampler option added there (and to SamplingOptions) is a flag with no rne_llm edit,
    parsed by its row."""
    options = _sampling_options()
    assert "topP" in options
    for option in options:
        flag = "--" + re.sub(r"([A-Z])", lambda m: "-" + m.group(1).lower(), option)
        done = subprocess.run([rne_llm, flag, "x", "--model", "m.pte", "--tokenizer", "t.json", "hi"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, option
        assert f"rne_llm: {flag} expects a number" in done.stderr, (option, done.stderr)

"""The tools' noise filter drops known library noise and nothing else.

Runs a child Python that does what a verification does (the real custom SDPA op eagerly, the
real ExecuTorch runtime loading and running an exported program and refusing a broken one)
inside the filter, and reads its real stderr.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import os, sys, warnings
    from rne_tools.runtime.quiet import configure_python_noise, filtered_native_stderr

    configure_python_noise()
    import torch
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401
    from executorch.runtime import Runtime
    from rne_tools.checks.runner import PteRunner

    with filtered_native_stderr():
        # Loading a program probes the CPU; the bindings print that through sys.stderr.
        PteRunner(os.environ["RNE_TEST_PTE"]).prefill([1, 2, 3])
        q = torch.randn(1, 4, 2, 8)
        kv = torch.zeros(1, 16, 2, 8)
        torch.ops.llama.custom_sdpa(q, kv, kv, 0, None, 0, True)  # logs the temp-allocator noise
        try:
            Runtime.get().load_program(b"this is not a program" * 8)
        except Exception as e:
            print(f"python saw: {type(e).__name__}", file=sys.stderr)
        os.write(2, b"[method.cpp:1] a native error line\\n")
        warnings.warn("a real warning from our code", UserWarning)
    print("done", file=sys.stderr)
    """
)


def run_child(code: str, pte: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "tools")}
    if pte is not None:
        env["RNE_TEST_PTE"] = str(pte)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_noise_is_dropped_and_real_errors_and_warnings_still_print(tiny_llama_8w):
    result = run_child(CHILD, tiny_llama_8w.pte_path)
    err = result.stderr
    assert result.returncode == 0, err
    # The noise, emitted for real by the op, the runtime's CPU probe and torchao's import.
    assert "No temp allocator provided" not in err
    assert "cpuinfo_utils" not in err
    assert "Failed to load" not in err
    # What still prints: the runtime's own error on a broken program, an error line written
    # natively, a warning from our code, and Python's writes after the filter closed.
    assert "python saw: RuntimeError" in err
    assert "] Program identifier" in err  # ExecuTorch's own error log for the broken program
    assert "[method.cpp:1] a native error line" in err
    assert "a real warning from our code" in err
    assert err.rstrip().endswith("done")


def test_without_the_filter_the_same_noise_prints(tiny_llama_8w):
    """Guards the test above: the noise it checks for is really produced here."""
    unfiltered = CHILD.replace("configure_python_noise()\n", "").replace(
        "with filtered_native_stderr():", "if True:"
    )
    err = run_child(unfiltered, tiny_llama_8w.pte_path).stderr
    assert "No temp allocator provided" in err
    assert "[cpuinfo_utils.cpp:" in err
    assert "Failed to load" in err


def test_lines_from_a_process_that_aborts_still_print():
    """The filter is a separate process, so a native crash does not swallow its last words."""
    code = textwrap.dedent(
        """
        import os
        from rne_tools.runtime.quiet import filtered_native_stderr
        with filtered_native_stderr():
            os.write(2, b"[program.cpp:9] fatal: about to abort\\n")
            os.abort()
        """
    )
    result = run_child(code)
    assert result.returncode != 0
    assert "fatal: about to abort" in result.stderr


SCOPED_IMPORT = textwrap.dedent(
    """
    import logging
    from rne_tools.runtime.quiet import quiet_library_loggers

    with quiet_library_loggers():
        import torchao  # noqa: F401  (what transformers imports inside from_pretrained)
        logging.getLogger("torchao").error("a real torchao error")
    logging.getLogger("torchao").warning("a torchao warning after the block")
    """
)


def test_a_lazy_library_import_is_quiet_only_inside_its_scope():
    """gguf_import's checkpoint conversion imports torchao through transformers: its CUDA
    extension failures and torch's register_constant deprecation are dropped there, an error
    still prints, and the loggers' levels are back after the block."""
    plain = run_child("import torchao")
    assert "Failed to load" in plain.stderr and "register_constant" in plain.stderr
    scoped = run_child(SCOPED_IMPORT)
    assert scoped.returncode == 0, scoped.stderr
    assert "Failed to load" not in scoped.stderr and "register_constant" not in scoped.stderr
    assert "a real torchao error" in scoped.stderr
    assert "a torchao warning after the block" in scoped.stderr

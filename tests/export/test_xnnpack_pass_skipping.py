"""XNNPACK's preprocessing skips the passes that find nothing to rewrite in a graph (each one
re-traces the whole delegated graph): the program is byte for byte the one that running every
pass emits, with fewer passes run."""

import hashlib

import pytest

from rne_tools.export import export_llm
from rne_tools.export.backends import xnnpack


def _export(tmp_path, model_id, quantization, name):
    result = export_llm(
        model_id,
        "xnnpack",
        tmp_path / name,
        quantization,
        random_config="tiny",
        max_context=64,
        max_chunk=16,
        verify=False,
        progress=False,
    )
    return hashlib.sha256(result.pte_path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "model_id,quantization",
    # Llama with torchao's quantized linears and the custom SDPA; Gemma 4 with its matmul
    # attention (which the SDPA pattern pass must not be skipped for if it could match).
    [("smollm2_135m", "8da4w"), ("gemma4_e2b", "fp32")],
)
def test_skipping_passes_without_work_emits_the_same_program(
    tmp_path, monkeypatch, model_id, quantization
):
    from executorch.backends.xnnpack import _passes

    xnnpack._skip_passes_without_work()
    skipping = _passes.XNNPACKPassManager.transform
    runs = []
    run_pass = _passes._transform

    def counted(program, transform_pass):
        runs.append(type(transform_pass).__name__)
        return run_pass(program, transform_pass)

    monkeypatch.setattr(_passes, "_transform", counted)
    fast = _export(tmp_path, model_id, quantization, "skipping")
    skipped_runs = len(runs)

    runs.clear()
    monkeypatch.setattr(_passes.XNNPACKPassManager, "transform", skipping.runs_every_pass)
    monkeypatch.setattr(xnnpack, "_skip_passes_without_work", lambda: None)
    full = _export(tmp_path, model_id, quantization, "every-pass")

    assert fast == full
    assert "Conv1dUnsqueezePass" in runs  # the reference really ran every pass
    print(f"{model_id} {quantization}: {skipped_runs} of {len(runs)} pass runs")
    assert skipped_runs <= len(runs) * 0.7

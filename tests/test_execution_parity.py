"""Execution parity: exports run by our C++ runner on the source-built ExecuTorch runtime
(``build/linux``, tools/build_binaries.py --platform linux) against the eager model.

Every forward of a sequence longer than the sliding window, fed in uneven chunks, is compared.

Tolerances, per dtype:
- MLX int4 computes in bf16. bf16 keeps 8 significant bits, so no fixed bound fits every
  logit; the yardstick is eager bf16's own error. Both the runtime and eager bf16 are compared
  with the same int4 model evaluated in fp32, and the runtime's error may be at most
  ``BF16_ERROR_RATIO`` times eager's (MLX accumulates differently from PyTorch; measured ~2x).
  Greedy tokens must be equal wherever eager's top-2 margin exceeds twice eager's bf16 error
  (below that, bf16 rounding alone may flip the order).
- The runtime's chunked prefill and its token-by-token decode of the same tokens are compared
  too: the same positions must give the same logits up to ``CHUNKING_ATOL`` (bf16 round-off of
  a different reduction order).
"""

import numpy as np
import pytest
import torch

from rne_tools.export import cached_export, cpp_runtime
from rne_tools.export.backends import ExportOptions, get_backend
from rne_tools.export.pipeline import load_source, resolve_source

pytestmark = [pytest.mark.executorch_source, pytest.mark.slow]

BF16_ERROR_RATIO = 4.0
CHUNKING_ATOL = 0.25

# Tiny random Gemma 4 (every E2B feature: sliding + global layers, shared KV, per-layer
# inputs, softcap): window 6, chunk 5, a 64-position cache.
MLX_TINY = dict(random_config="tiny", max_context=64, max_chunk=5, embedding_quantization="4w")
CHUNKS = [5, 3, 1, 4, 2, 5, 3, 1, 5, 2] + [1] * 8  # 39 tokens: > 6x the window, uneven


def _tokens(vocab: int, n: int, seed: int = 7) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n,), generator=g).tolist()


def _eager_logits(model, tokens, chunks) -> np.ndarray:
    rows, pos = [], 0
    with torch.no_grad():
        for n in chunks:
            out = model(torch.tensor([tokens[pos:pos + n]]), torch.tensor([pos]))
            rows.append(out[0].float().numpy())
            pos += n
    return np.stack(rows)


def _eager_models(result):
    """The eager model the export was verified against (bf16, int4) and the same in fp32."""
    options = ExportOptions(**result.report["options"])
    backend = get_backend(options.backend)
    source = resolve_source(options, None, result.report["random_config"])
    bf16 = backend.quantize(backend.transform(load_source(source, options), options), options)
    fp32 = backend.transform(load_source(source, options), options)
    fp32.to_dtype = lambda dtype: fp32  # keep fp32 activations; same int4 weight recipe
    fp32 = backend.quantize(fp32, options)
    return bf16.eval(), fp32.eval()


@pytest.fixture(scope="module")
def mlx_tiny():
    return cached_export("gemma4_e2b", "mlx", "int4", progress=False, **MLX_TINY)


def test_mlx_int4_runs_and_matches_eager(mlx_tiny):
    bf16, fp32 = _eager_models(mlx_tiny)
    tokens = _tokens(mlx_tiny.report["vocab_size"], sum(CHUNKS))
    runtime = cpp_runtime.forward_logits(mlx_tiny.pte_path, tokens, CHUNKS)
    eager = _eager_logits(bf16, tokens, CHUNKS)
    reference = _eager_logits(fp32, tokens, CHUNKS)

    eager_err = np.abs(eager - reference).max()
    runtime_err = np.abs(runtime - reference).max()
    print(f"MLX int4 tiny: max|runtime-fp32| {runtime_err:.4f}, max|eager_bf16-fp32| "
          f"{eager_err:.4f}, max|runtime-eager_bf16| {np.abs(runtime - eager).max():.4f}")
    assert np.isfinite(runtime).all()
    assert runtime_err <= BF16_ERROR_RATIO * eager_err, (runtime_err, eager_err)

    top2 = np.sort(eager, axis=-1)[:, -2:]
    decided = (top2[:, 1] - top2[:, 0]) > 2 * eager_err
    assert decided.any()
    assert (runtime.argmax(-1)[decided] == eager.argmax(-1)[decided]).all()


def test_mlx_chunked_prefill_equals_token_by_token(mlx_tiny):
    tokens = _tokens(mlx_tiny.report["vocab_size"], 17, seed=11)
    chunked = cpp_runtime.forward_logits(mlx_tiny.pte_path, tokens, [5, 5, 5, 2])
    single = cpp_runtime.forward_logits(mlx_tiny.pte_path, tokens, [1] * 17)
    ends = np.cumsum([5, 5, 5, 2]) - 1  # the position each chunk's logits belong to
    np.testing.assert_allclose(chunked, single[ends], atol=CHUNKING_ATOL)

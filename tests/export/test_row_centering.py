"""8w centres each linear's rows before quantizing: exact in float, and it spends XNNPACK's
symmetric per-channel int8 levels on the row's own range instead of on [-max|w|, max|w|]."""

import copy

import torch
from torch import nn
from torchao.quantization import IntxWeightOnlyConfig, quantize_
from torchao.quantization.granularity import PerAxis

from rne_tools.export.quantize import RowCenteredLinear, center_linear_rows, quantize_8w


def _model(offset: float) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 32, bias=False))
    with torch.no_grad():
        for layer in (model[0], model[2]):
            w = layer.weight
            # Rows spread like a trained layer's, each shifted by up to ``offset`` times its
            # spread (a 4-bit GGUF's per-group minimums leave rows like this).
            w.copy_(torch.randn_like(w) * 0.02 + offset * 0.02 * torch.rand(w.shape[0], 1))
    return model.eval().requires_grad_(False)


def _int8_error(model: nn.Module, centered: bool, x: torch.Tensor) -> float:
    reference = model(x)
    quantized = copy.deepcopy(model)
    if centered:
        quantize_8w(quantized, embedding_quantization="none")
    else:  # the same int8 per-channel weights, rows as they are
        quantize_(
            quantized,
            IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)),
            filter_fn=lambda m, fqn: isinstance(m, nn.Linear),
        )
    return (quantized(x) - reference).pow(2).mean().item()


def test_centering_is_exact_in_float_and_keeps_every_linear_quantizable():
    model = _model(offset=4.0)
    centered = copy.deepcopy(model)
    center_linear_rows(centered)
    x = torch.randn(3, 5, 256)
    torch.testing.assert_close(centered(x), model(x), atol=1e-5, rtol=1e-5)
    wrappers = [m for m in centered.modules() if isinstance(m, RowCenteredLinear)]
    assert len(wrappers) == 2
    for w in wrappers:  # each centred row spans [-r, r] around zero
        weight = w.linear.weight
        torch.testing.assert_close(weight.amax(1), -weight.amin(1))


def test_centering_cuts_int8_error_on_lopsided_rows_and_costs_nothing_on_centred_ones():
    x = torch.randn(8, 256)
    lopsided = _model(offset=4.0)
    plain, centered = _int8_error(lopsided, False, x), _int8_error(lopsided, True, x)
    print(f"lopsided rows: int8 output error {centered / plain:.2f}x of uncentred")
    assert centered < 0.5 * plain, (centered, plain)
    symmetric = _model(offset=0.0)
    plain, centered = _int8_error(symmetric, False, x), _int8_error(symmetric, True, x)
    print(f"centred rows: int8 output error {centered / plain:.2f}x of uncentred")
    assert centered < 1.1 * plain, (centered, plain)

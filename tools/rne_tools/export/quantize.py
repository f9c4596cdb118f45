"""Weight quantization with torchao, shared by backends that lower torchao's quantized ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rne_tools.errors import ExportError
from rne_tools.export.tied_head import tie_head_to_table, tied_heads

# Weights above this many elements are quantized a block of rows at a time (E2B's per-layer
# table has 2.35B): torchao's quantizer makes several full-size float temporaries.
_ROW_CHUNK = 1 << 24


def quantize_weights(
    model: nn.Module,
    config: Any,
    filter_fn: Callable[[nn.Module, str], bool],
    dtype: torch.dtype | None = None,
) -> None:
    """``torchao.quantization.quantize_`` with bounded memory, in place.

    Every quantization used here groups weights within a row (per row or per group of columns),
    so a large weight is quantized block by block of rows into one tensor of integer data, scales
    and zero points: the same tensor as quantizing it whole. Each block (and each smaller weight)
    is cast to ``dtype`` first (default: the weight's own), the dtype the quantized weight
    computes in.
    """
    from torchao.quantization import quantize_

    _look_up_rows_before_dequantizing()
    large = {
        m for name, m in model.named_modules() if filter_fn(m, name) and m.weight.numel() > _ROW_CHUNK
    }
    small = {
        m for name, m in model.named_modules() if filter_fn(m, name) and m not in large
    }
    if dtype is not None:
        for m in small:
            m.to(dtype)
    quantize_(model, config, filter_fn=lambda m, fqn: m in small)
    for m in large:
        m.weight = nn.Parameter(_quantized_in_row_blocks(m, config, dtype), requires_grad=False)


def _with_fields(weight: Any, **fields: torch.Tensor) -> Any:
    """A copy of torchao's ``IntxUnpackedToInt8Tensor`` ``weight`` with some of its tensors
    (``qdata``, ``scale``, ``zero_point``) replaced; its quantization settings are kept."""
    return type(weight)(
        fields.get("qdata", weight.qdata),
        fields.get("scale", weight.scale),
        fields.get("zero_point", weight.zero_point),
        weight.target_dtype,
        weight.block_size,
        weight.dtype,
        weight.activation_quantization,
    )


def _look_up_rows_before_dequantizing() -> None:
    """Make eager lookups in a quantized table dequantize only the rows looked up.

    torchao dequantizes the whole table on every eager lookup: 9.4 GB of float32 per call for
    E2B's per-layer table. Rows are quantized independently, so dequantizing the gathered rows
    gives the same values. While exporting, torchao's own dequantize + embedding is traced: the
    pattern ExecuTorch fuses into its quantized embedding kernels.
    """
    from torchao.quantization.quantize_.workflows.intx.intx_unpacked_to_int8_tensor import (
        IntxUnpackedToInt8Tensor as Quantized,
    )

    table = Quantized._TORCH_FN_TABLE[Quantized]
    whole = table[nn.functional.embedding]
    if getattr(whole, "looks_up_rows_first", False):
        return

    def embedding(func: Any, types: Any, args: Any, kwargs: Any) -> torch.Tensor:
        indices, weight = args[0], args[1]
        # max_norm rewrites the table; padding_idx only matters to gradients.
        if torch.compiler.is_compiling() or kwargs.get("max_norm") is not None:
            return whole(func, types, args, kwargs)
        rows = indices.reshape(-1)
        part = _with_fields(
            weight,
            qdata=weight.qdata[rows],
            scale=weight.scale[rows],
            zero_point=weight.zero_point[rows],
        )
        return part.dequantize().reshape(*indices.shape, weight.shape[1])

    embedding.looks_up_rows_first = True  # type: ignore[attr-defined]
    table[nn.functional.embedding] = embedding


def _quantized_in_row_blocks(module: nn.Module, config: Any, dtype: torch.dtype | None) -> Any:
    from torchao.quantization import quantize_
    from torchao.quantization.quantize_.workflows.intx.intx_unpacked_to_int8_tensor import (
        IntxUnpackedToInt8Tensor,
    )

    weight = module.weight.detach()
    step = max(1, _ROW_CHUNK // weight[0].numel())
    fields = ("qdata", "scale", "zero_point")
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for start in range(0, weight.shape[0], step):
            # Embedding and linear weights quantize alike (2-d, grouped within rows).
            block = nn.Linear(weight.shape[1], 1, bias=False, device="meta")
            rows = weight[start : start + step].to(dtype or weight.dtype)
            block.weight = nn.Parameter(rows, requires_grad=False)
            quantize_(block, config, filter_fn=lambda m, fqn: True)
            part = block.weight
            if not isinstance(part, IntxUnpackedToInt8Tensor):
                raise ExportError(f"row-block quantization does not support {type(config).__name__}.")
            if not out:  # filled in place: concatenating blocks would hold the result twice
                first = part
                out = {
                    f: torch.empty((weight.shape[0], *getattr(part, f).shape[1:]),
                                   dtype=getattr(part, f).dtype)
                    for f in fields
                }
            for f in fields:
                out[f][start : start + step] = getattr(part, f)
    return _with_fields(first, **out)


def _half_group_scales(model: nn.Module) -> None:
    """Store each 4-bit table's group scales in fp16 where they round-trip faithfully.

    A group of 32 four-bit values with an fp32 scale costs 5 bits a value; with an fp16 scale,
    4.5 (E2B's tables: 172 MB less). The rows are still computed in float32 from the stored
    scales, by eager and by the program's ``embedding_4bit.dtype`` alike. A table with a scale
    fp16 cannot hold to within its rounding (overflow, subnormal) keeps fp32 scales.
    """
    from torchao.quantization.quantize_.workflows.intx.intx_unpacked_to_int8_tensor import (
        IntxUnpackedToInt8Tensor as Quantized,
    )

    for m in model.modules():
        weight = getattr(m, "weight", None)
        if not isinstance(m, nn.Embedding) or not isinstance(weight, Quantized):
            continue
        scale = weight.scale
        half = scale.to(torch.float16)
        error = (half.float() - scale).abs() / scale.abs().clamp_min(torch.finfo(scale.dtype).tiny)
        if not torch.isfinite(half).all() or float(error.max()) > 2.0**-11:
            continue
        m.weight = nn.Parameter(_with_fields(weight, scale=half), requires_grad=False)


def spell_out_lookup_dtypes(graph_module: torch.fx.GraphModule) -> int:
    """Give a ``torchao.dequantize_affine`` whose scales are not in its output dtype that dtype
    as an explicit argument.

    ``torch.export`` drops an argument equal to its default (float32), and ExecuTorch's quant
    fusion turns a dequantize without one + lookup into ``embedding_4bit.default``, which
    answers in the scales' dtype: fp16 rows read as float32. With the dtype spelled out it
    chooses ``embedding_4bit.dtype``, which computes the rows in the dtype asked for. Lookups
    whose scales already have the output dtype keep the kernels they had. Returns the number of
    nodes changed.
    """
    import torchao.quantization.quant_primitives  # noqa: F401  (registers the op)

    target = torch.ops.torchao.dequantize_affine.default
    index = [a.name for a in target._schema.arguments].index("output_dtype")
    changed = 0
    for node in graph_module.graph.nodes:
        # An edge-dialect node wraps the op (``EdgeOpOverload._op``).
        op = getattr(node.target, "_op", node.target)
        if node.op != "call_function" or op != target:
            continue
        if len(node.args) > index or "output_dtype" in node.kwargs:
            continue  # a dtype already given, positionally or by name, is kept
        scale = node.args[2].meta.get("val")
        if scale is not None and scale.dtype != torch.float32:  # the schema's default
            node.args = (*node.args, torch.float32)
            changed += 1
    if changed:
        graph_module.recompile()
    return changed


def quantize_8da4w(
    model: nn.Module,
    group_size: int = 32,
    embedding_quantization: str = "8w",
    tie_head: bool = False,
    table_group_size: int | None = None,
) -> list[str]:
    """Quantize linears to 8-bit dynamic activations + 4-bit grouped weights, embeddings to
    8-bit per-row or 4-bit grouped weights (``embedding_quantization``: "8w", "4w", "none"), in
    groups of ``table_group_size`` (default: ``group_size``) where that divides a table's width,
    except a table a head shares: that is the head's weight too, grouped like the linears.

    Embeddings are quantized first, so a tied output head is quantized as a linear of its own,
    unless ``tie_head`` and the tables are 4-bit: then the head reads the packed token table
    (``export.tied_head``). Returns the names of linears left in float because ``group_size``
    does not divide their input width.
    """
    return _quantize(
        model,
        torch.int4,
        group_size,
        embedding_quantization,
        tie_head=tie_head,
        table_group_size=table_group_size,
    )


def quantize_8da8w(model: nn.Module, embedding_quantization: str = "8w") -> list[str]:
    """Quantize linears to 8-bit dynamic activations + 8-bit per-channel weights (XNNPACK's
    qd8-f32-qc8w kernels), embeddings as in ``quantize_8da4w``: about 4x smaller than fp32 and
    closer to it than 4-bit weights (SmolLM2, whose checkpoint was already 4-bit once: top-1
    agreement with fp32 90% vs 68% for 8da4w, tools/benchmarks/quant_quality.py). Returns []
    (every linear is quantized)."""
    return _quantize(model, torch.int8, 32, embedding_quantization)


def quantize_8w(model: nn.Module, embedding_quantization: str = "8w") -> list[str]:
    """Quantize linears to 8-bit per-channel weights with float activations (XNNPACK's
    f32-qc8w kernels), embeddings as in ``quantize_8da4w``. The same 4x smaller weights as
    8da8w without rounding the activations, which is where 8da8w loses SmolLM2.

    Each linear's rows are centred first (:class:`RowCenteredLinear`): XNNPACK's per-channel
    int8 weights are symmetric, and a row whose values are not centred on zero wastes up to half
    of its 256 levels. SmolLM2's rows come from a 4-bit GGUF with per-group minimums and are
    often lopsided; centring takes the exported program's top-1 agreement with fp32 from 96.3% to
    97.4% over 50 chat prompts (tools/benchmarks/quant_quality.py), for about 14% of its decode
    speed (the correction is three small ops per linear). Returns [] (every linear is
    quantized)."""
    center_linear_rows(model)
    return _quantize(model, torch.int8, 32, embedding_quantization, dynamic_activations=False)


class RowCenteredLinear(nn.Module):
    """``W x + b`` computed as ``(W - m 1^T) x + m (1^T x) + b``, ``m`` the midpoint of each
    row's range.

    The centred weight is an ordinary ``nn.Linear`` (``self.linear``) for the quantizer to
    take; symmetric quantization of it is as fine as asymmetric quantization of ``W`` would be,
    which XNNPACK's per-channel int8 kernels do not offer. The correction is one float dot
    product per token (``1^T x``, a one-row linear) and a scaled add.
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach()
        midpoint = (weight.amax(dim=1) + weight.amin(dim=1)) / 2
        self.linear = nn.Linear(
            linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta"
        )
        self.linear.weight = nn.Parameter(weight - midpoint[:, None], requires_grad=False)
        if linear.bias is not None:
            self.linear.bias = nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        # float32 like the quantized linear's output (quantize_8w computes in float32).
        self.register_buffer("midpoint", midpoint.float())
        self.register_buffer("ones", torch.ones(1, linear.in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + F.linear(x, self.ones) * self.midpoint


def center_linear_rows(model: nn.Module) -> None:
    """Replace every ``nn.Linear`` of ``model`` with its :class:`RowCenteredLinear`, in place."""
    targets = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    for name, linear in targets:
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name), attr, RowCenteredLinear(linear))


def _quantize(
    model: nn.Module,
    weight_dtype: torch.dtype,
    group_size: int,
    embedding_quantization: str,
    dynamic_activations: bool = True,
    tie_head: bool = False,
    table_group_size: int | None = None,
) -> list[str]:
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    table_group_size = table_group_size or group_size
    for size in {group_size, table_group_size}:
        if size <= 0 or size % 2:
            raise ExportError(f"group size must be a positive even number, got {size}.")
    # A table a head shares is that linear's weight too: it is grouped like the linears. A table
    # only looked up takes ``table_group_size`` where that divides its width, else theirs too.
    tied = tied_heads(model)
    head_tables = {t for t, _ in tied}

    def table_group(m: nn.Module, fqn: str) -> int:
        own = fqn not in head_tables and m.embedding_dim % table_group_size == 0
        return table_group_size if own else group_size

    if embedding_quantization != "none":
        bits = torch.int8 if embedding_quantization == "8w" else torch.int4
        for size in dict.fromkeys((group_size, table_group_size)):
            granularity = PerAxis(0) if embedding_quantization == "8w" else PerGroup(size)
            quantize_weights(
                model,
                IntxWeightOnlyConfig(weight_dtype=bits, granularity=granularity),
                lambda m, fqn, size=size: (
                    isinstance(m, nn.Embedding)
                    and table_group(m, fqn) == size
                    and (embedding_quantization == "8w" or m.embedding_dim % size == 0)
                ),
                # The graph computes in float32; a 16-bit table (Gemma 4's per-layer one) too.
                dtype=torch.float32,
            )
        if embedding_quantization == "4w":
            _half_group_scales(model)
            for table, head in tied if tie_head else ():
                tie_head_to_table(model, table, head)
    # Grouped 4-bit weights need the group size to divide the input width; per-channel 8-bit
    # weights take every linear.
    per_channel = weight_dtype == torch.int8

    def fits(m: nn.Module) -> bool:
        return per_channel or m.in_features % group_size == 0

    skipped = [
        name for name, m in model.named_modules() if isinstance(m, nn.Linear) and not fits(m)
    ]
    granularity = PerAxis(0) if per_channel else PerGroup(group_size)
    config = (
        Int8DynamicActivationIntxWeightConfig(
            weight_dtype=weight_dtype, weight_granularity=granularity
        )
        if dynamic_activations
        else IntxWeightOnlyConfig(weight_dtype=weight_dtype, granularity=granularity)
    )
    quantize_weights(
        model, config, lambda m, fqn: isinstance(m, nn.Linear) and fits(m), dtype=torch.float32
    )
    return skipped

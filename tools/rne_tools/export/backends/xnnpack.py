"""XNNPACK (CPU) backend: fp32, 8w (int8 per-channel weights, float activations), 8da4w (int8
dynamic activations, int4 grouped weights) or 8da8w (int8 dynamic activations, int8 per-channel
weights)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rne_tools.backend_catalog import load_catalog
from rne_tools.export.backends import (
    Backend,
    ExportOptions,
    TransformResult,
    check_quantization,
)
from rne_tools.export.backends.xnnpack_ops import apply_xnnpack_transforms
from rne_tools.export.quantize import quantize_8da4w, quantize_8da8w, quantize_8w


class XnnpackBackend(Backend):
    name = "xnnpack"
    runtime_name = load_catalog().backend("xnnpack").runtime
    allowed_quantizations = ("fp32", "8w", "8da4w", "8da8w")
    compute_dtype = None

    def validate(self, options: ExportOptions) -> None:
        check_quantization(self, options)

    def transform(self, model: nn.Module, options: ExportOptions) -> TransformResult:
        # The model declares whether its quantized variants may keep the KV cache in fp16; fp32
        # stays the exact reference.
        half_cache = options.quantization != "fp32" and model.half_kv_cache_when_quantized
        apply_xnnpack_transforms(model, torch.float16 if half_cache else None)
        return TransformResult(model)

    def quantize(self, model: nn.Module, options: ExportOptions) -> nn.Module:
        if options.quantization == "8da4w":
            # The head reads the 4-bit token table instead of a copy of it.
            quantize_8da4w(
                model,
                options.group_size,
                options.embedding_quantization,
                tie_head=True,
                table_group_size=options.table_group_size,
            )
        elif options.quantization == "8da8w":
            quantize_8da8w(model, options.embedding_quantization)
        elif options.quantization == "8w":
            quantize_8w(model, options.embedding_quantization)
        return model

    def partitioners(self, options: ExportOptions) -> list[Any]:
        _skip_passes_without_work()
        from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
        from executorch.backends.xnnpack.partition.config.gemm_configs import LinearConfig
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        configs = [
            _weight_only_linear_config() if c is LinearConfig else c
            for c in ALL_PARTITIONER_CONFIGS
        ]
        return [XnnpackPartitioner(configs=configs)]

    def compile_config(self) -> Any:
        from executorch.exir import EdgeCompileConfig

        # The KV-cache write-back and torchao's quantize ops are not core ATen.
        return EdgeCompileConfig(_check_ir_validity=False)


def _weight_only_linear_config() -> type:
    """XNNPACK's linear config, also taking linears whose weights are quantized and whose
    activations are not (8w).

    XNNPACK runs those as f32-qc8w fully-connected: int8 weights packed ahead of time, float
    math. The stock config classifies a quantized weight without a dynamic-quantized input as
    static quantization and then wants a quantized input and output, so it leaves these linears
    to the portable runtime, which dequantizes every weight on every call.
    """
    from executorch.backends.xnnpack.partition.config.gemm_configs import LinearConfig
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType
    from executorch.backends.xnnpack.utils.quant_utils import is_dequant
    from executorch.backends.xnnpack.utils.utils import get_input_node

    class WeightOnlyLinearConfig(LinearConfig):
        def _float_activations(self, node: torch.fx.Node, precision: Any) -> bool:
            return precision == ConfigPrecisionType.STATIC_QUANT and not is_dequant(
                get_input_node(node, self.act_idx)
            )

        def _get_act_deps(
            self, node: torch.fx.Node, ep: Any, precision: Any
        ) -> tuple[bool, list[torch.fx.Node]]:
            if self._float_activations(node, precision):
                return True, []
            return super()._get_act_deps(node, ep, precision)

        def _get_output_deps(
            self, node: torch.fx.Node, ep: Any, precision: Any
        ) -> tuple[bool, list[torch.fx.Node]]:
            if self._float_activations(node, precision):
                return True, []
            return super()._get_output_deps(node, ep, precision)

    return WeightOnlyLinearConfig


def _ops_a_pass_rewrites() -> dict[type, list[set[str]]]:
    """For XNNPACK passes that rewrite only specific ops or op patterns: the op sets, one of
    which a graph must contain in full for the pass to have anything to do (op names as
    ``node.target.__name__``)."""
    from executorch.backends.xnnpack import _passes as xp
    from executorch.backends.xnnpack.partition.graphs import bilinear_2d, sdpa

    def patterns(graphs: Any) -> list[set[str]]:
        return [
            {n.target.__name__ for n in g.graph.nodes if n.op == "call_function"} for g in graphs
        ]

    batch_norm = [
        {"aten.native_batch_norm.default"},
        {"aten._native_batch_norm_legit_no_training.default"},
    ]
    return {
        xp.ConvertToUpsampleBilinear2d: patterns(bilinear_2d.get_graphs_dict()),
        xp.ConvertToSDPAPass: patterns(sdpa.get_graphs()),
        xp.FuseBatchNormPass: batch_norm,
        xp.DecomposeBatchNorm: batch_norm,
        xp.DecomposeConcatenate: [{"aten.cat.default"}],
        xp.RemoveGetItemPass: [{"aten.max_pool2d_with_indices.default"}, {"aten.max.dim"}],
        xp.InsertPadQDQPass: [{"aten.constant_pad_nd.default"}],
        xp.Conv1dUnsqueezePass: [{"aten.convolution.default"}],
        xp.PReLUReshapePass: [{"aten._prelu_kernel.default"}],
    }


def _skip_passes_without_work() -> None:
    """Make XNNPACK's preprocessing skip a pass when the graph has none of the ops it rewrites.

    Each of its ~17 passes ends by re-tracing the whole delegated graph with fake tensors,
    changed or not; for an LLM most of them (batch norm, convolution, upsampling, PReLU, ...)
    find nothing to change. Skipping them took a real 8da4w SmolLM2 export from 389 s to 304 s.
    Whether a pass has work is decided on the graph as the passes before it left it.
    """
    from executorch.backends.xnnpack._passes import XNNPACKPassManager

    if getattr(XNNPACKPassManager.transform, "skips_passes_without_work", False):
        return
    run_all = XNNPACKPassManager.transform
    rewrites = _ops_a_pass_rewrites()

    def transform(self: Any) -> Any:
        program = self.exported_program
        for pass_ in self.passes:
            present = {
                getattr(n.target, "__name__", "")
                for n in program.graph.nodes
                if n.op == "call_function"
            }
            if pass_ in rewrites and not any(ops <= present for ops in rewrites[pass_]):
                continue
            program = run_all(XNNPACKPassManager(program, passes=[pass_]))
        return program

    transform.skips_passes_without_work = True  # type: ignore[attr-defined]
    transform.runs_every_pass = run_all  # type: ignore[attr-defined]
    XNNPACKPassManager.transform = transform


BACKEND = XnnpackBackend()

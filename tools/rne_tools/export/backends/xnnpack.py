"""XNNPACK (CPU) backend: fp32, 8w (int8 per-channel weights, float activations), 8da4w (int8
dynamic activations, int4 grouped weights) or 8da8w (int8 dynamic activations, int8 per-channel
weights)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rne_tools.export.backends import ExportOptions, check_quantization
from rne_tools.export.custom_ops import use_custom_attention
from rne_tools.export.quantize import quantize_8da4w, quantize_8da8w, quantize_8w
from rne_tools.export.xnnpack_modules import use_xnnpack_friendly_modules


class XnnpackBackend:
    name = "xnnpack"
    runtime_name = "XnnpackBackend"
    allowed_quantizations = ("fp32", "8w", "8da4w", "8da8w")
    compute_dtype = None

    def validate(self, options: ExportOptions) -> None:
        check_quantization(self, options)

    def transform(self, model: nn.Module, options: ExportOptions) -> nn.Module:
        # Quantized variants keep the KV cache in fp16, as llama.cpp keeps its own: at long
        # context a decode step reads the whole cache, and half the bytes is most of its
        # attention time. fp32 stays the exact reference.
        use_custom_attention(model, None if options.quantization == "fp32" else torch.float16)
        use_xnnpack_friendly_modules(model)
        return model

    def quantize(self, model: nn.Module, options: ExportOptions) -> nn.Module:
        if options.quantization == "8da4w":
            quantize_8da4w(model, options.group_size, options.embedding_quantization)
        elif options.quantization == "8da8w":
            quantize_8da8w(model, options.embedding_quantization)
        elif options.quantization == "8w":
            quantize_8w(model, options.embedding_quantization)
        return model

    def partitioners(self, options: ExportOptions) -> list[Any]:
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


BACKEND = XnnpackBackend()

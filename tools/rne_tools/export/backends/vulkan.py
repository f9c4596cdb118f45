"""Vulkan backend (Android GPU): fp16, or 8da4w (int8 dynamic activations, int4 grouped weights).

The exported graph is float32; the Vulkan delegate is compiled with ``force_fp16`` so its
tensors and arithmetic are fp16 on the device (RMSNorm and softmax accumulate in fp32).

Source transforms (``backends.vulkan_ops``) map every RMSNorm onto ``et_vk::rms_norm`` and
attention with its KV cache onto ``et_vk::sdpa`` + ``llama::update_cache``, so those run on
the GPU instead of falling back to CPU kernels. Embedding tables stay on the CPU, read from the
mapped program (``HostEmbedding``).

8da4w with 4-bit tables: a head tied to the token table (Gemma 4's) reads that packed table on the
CPU (``rne::tied_head_4bit``) instead of a GPU copy of its own. E2B's copy was 0.3 GB of file and
of device memory (226 MB of 4-bit weights, 50 MB of weight sums, 25 MB of scales), sharded over
two storage buffers; the delegate now returns the final hidden state, and the head's 403 M
multiply-adds a token run on the CPU cores.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import nn

from rne_tools.backend_catalog import load_catalog
from rne_tools.checks.delegation import delegation_by_op
from rne_tools.checks.transform import check_transform
from rne_tools.errors import ExportError, VerificationError
from rne_tools.export.backends import (
    Backend,
    ExportOptions,
    TransformResult,
    check_quantization,
)
from rne_tools.export.quantize import quantize_8da4w
from rne_tools.models.layers import Softcap

MIN_DELEGATED_SHARE = 0.95


def _head_reads_table(options: ExportOptions) -> bool:
    """Whether a head tied to the token table reads that table on the CPU: 8da4w with 4-bit
    tables, the tables ``tied_head.tie_head_to_table`` packs."""
    return options.quantization == "8da4w" and options.embedding_quantization == "4w"


def fused_ops(model: nn.Module) -> tuple[str, ...]:
    """Edge op names of the fused kernels that must all be delegated, by the attention path the
    transform table chose. The in-place ``llama::update_cache`` shows up as its
    functionalization wrapper (the graph's only one). On the custom-op path (every layer full
    attention over its own cache) the delegate fuses each custom_sdpa with its cache updates
    (sdpa_with_kv_cache); otherwise attention is ``et_vk::sdpa``."""
    from rne_tools.export.custom_ops import CustomOpCausalSDPA

    custom = any(isinstance(m, CustomOpCausalSDPA) for m in model.modules())
    sdpa = "llama_custom_sdpa_default" if custom else "et_vk_sdpa_default"
    return ("et_vk_rms_norm_default", sdpa, "auto_functionalized_v2")


def _fit_textures_conservatively() -> None:
    """ExecuTorch's Vulkan partitioner asks whether a tensor fits the texture limits with a
    plain ``<=``, which raises on a size that depends on data (the attention spans, bounded by
    the chunk's start). Such a tensor may not fit, so it counts as not fitting and gets buffer
    storage, as tensors over the limits always do."""
    from executorch.backends.vulkan import utils
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    def extents_are_valid(extents: Any, limits: Any) -> bool:
        return all(guard_or_false(e <= limit) for e, limit in zip(extents, limits, strict=True))

    utils.extents_are_valid = extents_are_valid


def _read_caches_where_they_are() -> None:
    """Make ExecuTorch's Vulkan layout pass read a KV cache in the storage it already has.

    A cache over the device's texture limits (2,048 slots along the packed depth, ExecuTorch's
    default) is a buffer, where ``update_cache`` writes it. With ``force_fp16`` the pass first
    tries a texture for every operator argument, so the slice that takes the attended span out
    of the cache asked for a texture, and the pass inserted a copy of the whole cache into one
    before it, on every forward: the program's cost and memory followed ``max_context``
    (tiny Gemma 4 on lavapipe: a 2,100-slot export decoded at 128 tokens 35% slower than a
    1,900-slot one). Now an argument that is a cache already in a buffer constrains the
    operator to that buffer first, and what follows the slice converts only the span."""
    from executorch.backends.vulkan import utils
    from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
    from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkStorageType
    from executorch.exir.dialects._ops import ops as exir_ops

    if getattr(TagMemoryMetaPass.constrain_op_arg_repset, "reads_caches_in_place", False):
        return
    constrain = TagMemoryMetaPass.constrain_op_arg_repset
    prepack = exir_ops.edge.et_vk.prepack.default

    def constrain_op_arg_repset(self: Any, arg_i: int, op_repsets: Any) -> None:
        arg = op_repsets.op_node.args[arg_i]
        # A prepacked tensor already placed in a buffer: a cache, placed by update_cache.
        if (
            isinstance(arg, torch.fx.Node)
            and arg.target == prepack
            and utils.has_node_repr(arg)
            and utils.get_node_repr(arg).storage_type == VkStorageType.BUFFER
        ):
            op_repsets.try_constrain_with_arg_repset(
                arg_i, utils.make_tensor_repset(utils.get_node_repr(arg))
            )
        constrain(self, arg_i, op_repsets)

    constrain_op_arg_repset.reads_caches_in_place = True  # type: ignore[attr-defined]
    TagMemoryMetaPass.constrain_op_arg_repset = constrain_op_arg_repset


class VulkanBackend(Backend):
    name = "vulkan"
    runtime_name = load_catalog().backend("vulkan").runtime
    allowed_quantizations = ("fp16", "8da4w")
    verify_problem = (
        "the Vulkan delegate owns the KV caches, one copy per method, so a verify method would "
        "not see what forward wrote; it needs the verify rows computed inside forward's delegate"
    )
    compute_dtype = torch.float16

    def validate(self, options: ExportOptions) -> None:
        check_quantization(self, options)

    def transform(self, model: nn.Module, options: ExportOptions) -> TransformResult:
        from rne_tools.export.backends.vulkan_ops import apply_vulkan_transforms

        # A head that will read the token table is not sharded: it never reaches the GPU.
        transform = partial(apply_vulkan_transforms, keep_tied_heads=_head_reads_table(options))
        return TransformResult(*check_transform(model, transform))

    def quantize(self, model: nn.Module, options: ExportOptions) -> nn.Module:
        from rne_tools.export.backends.vulkan_ops import STORAGE_BUFFER_BYTES, wide_linears
        from rne_tools.export.host_tables import host_tables

        # The graph stays float32; the delegate stores and computes it in fp16 (force_fp16).
        if options.quantization == "8da4w":
            model.left_unquantized = quantize_8da4w(
                model,
                options.group_size,
                options.embedding_quantization,
                tie_head=_head_reads_table(options),
                table_group_size=options.table_group_size,
            )
        # Only a head left whole to read its table can be over a storage buffer here; if its
        # table could not be packed, it would not load on a device.
        if wide := wide_linears(model):
            raise ExportError(
                f"Vulkan: {', '.join(wide)} exceed one storage buffer ({STORAGE_BUFFER_BYTES} "
                "bytes) and were left whole for a head that reads the 4-bit token table, but "
                f"the table could not be packed for it (group size {options.group_size} must be "
                "a multiple of 32)."
            )
        model.host_tables = host_tables(model)
        return model

    def partitioners(self, options: ExportOptions) -> list[Any]:
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        from rne_tools.export.host_tables import HOST_MODULES

        _fit_textures_conservatively()
        _read_caches_where_they_are()
        blocklist = list(HOST_MODULES)
        if _head_reads_table(options):
            # What follows a CPU head stays there: a second delegate for it took the graph's
            # range checks on the cache position away from the first, whose lowering then
            # failed on the attention spans' data-dependent slices.
            blocklist.append(Softcap.__name__)
        return [VulkanPartitioner({"force_fp16": True}, nn_module_blocklist=blocklist)]

    def compile_config(self) -> Any:
        from executorch.exir import EdgeCompileConfig

        return EdgeCompileConfig(_check_ir_validity=False)

    def inspect(self, model: nn.Module, program: Any, options: ExportOptions) -> dict[str, Any]:
        """Delegated share of compute ops and the fused ops' placement; raises
        VerificationError below 95% or if any RMSNorm / SDPA / cache update stays on CPU."""
        by_op = delegation_by_op(program)
        delegated = sum(c["delegated"] for c in by_op.values())
        total = delegated + sum(c["cpu"] for c in by_op.values())
        share = delegated / total if total else 0.0
        fused = {
            op: by_op.get(op, {"delegated": 0, "cpu": 0})
            for op in fused_ops(model)
        }
        report = {
            "compute_ops_delegated_share": round(share, 4),
            "ops_on_cpu": {k: c["cpu"] for k, c in by_op.items() if c["cpu"]},
            "fused_ops": fused,
            "left_unquantized": getattr(model, "left_unquantized", []),
            # Linears over one storage buffer (2^27 bytes) split into row shards; every table
            # looked up on the CPU.
            "sharded_linears": getattr(model, "sharded_linears", []),
            "host_tables": getattr(model, "host_tables", []),
        }
        missing = [op for op, c in fused.items() if c["cpu"] or not c["delegated"]]
        if share < MIN_DELEGATED_SHARE or missing:
            raise VerificationError(
                f"Vulkan export delegates {share:.1%} of compute ops (target "
                f"{MIN_DELEGATED_SHARE:.0%}); fused ops not (all) delegated: {missing}."
            )
        return report


BACKEND = VulkanBackend()

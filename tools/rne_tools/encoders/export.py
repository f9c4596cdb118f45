"""Export Gemma 4's encoders to verified ``.pte`` programs: the machinery both share (lowering,
delegation report, verification gate, cache) and the vision encoder (the audio encoder's own
part is ``rne_tools.encoders.audio_export``).

The vision program (XNNPACK; fp32, or quantized with ``--quantization``, below):

- ``vision_encoder(pixel_values[1, P, 3 * patch^2] f32, position_ids[1, P, 2] i64)
  -> embeddings[P / pooling^2, text_hidden] f32``, ``P = max_soft_tokens * pooling^2``: exactly
  the tensors transformers' Gemma 4 image processor gives for one image (and ``cpp/media``'s
  ``gemma4_preprocess``). Row ``i < num_soft_tokens`` is the embedding of the image's ``i``-th
  image token; the rows after are zero (transformers drops them).
- constant methods ``vision_max_soft_tokens``, ``vision_patch_size``,
  ``vision_pooling_kernel_size``, ``vision_text_hidden`` (what the runner needs to preprocess
  for this program) and ``get_backend``.

Verification runs the program on the ExecuTorch Python runtime for a few generated pictures of
different shapes (through transformers' processor) and compares with transformers' own eager
image features (``reference_image_embeddings``): the export fails, writing nothing, unless the
largest absolute difference over every real row is within ``PARITY_BOUND`` times the standard
deviation of the reference embeddings, and the padding rows are zero. The report JSON beside the
program carries both numbers per picture.

**Quantization.** ``quantize_encoder`` runs the text exporter's torchao path
(``rne_tools.export.quantize``: ``8w`` int8 per-channel weights with float activations and each
row centred first, ``8da8w`` / ``8da4w`` int8 dynamic activations with int8 per-channel / int4
grouped weights) over an encoder's linears; position tables, convolutions and norms stay float.
A quantized program is verified as the text exporter verifies one: against the eager encoder
with the same quantized weights (torchao's eager arithmetic), within its quantization's bound
(``PARITY_BOUNDS``); its agreement with transformers' fp32 eager model (max |diff| over the
std, the cosine of every soft token's row: worst and mean) is reported beside it
(``fp32_agreement``), which is what choosing a quantization reads.

An export runs in two halves: ``trace_encoder`` (build the encoder from the reference model,
quantize it, ``torch.export`` each method) and ``finish_encoder_export`` (lower, serialise,
verify, report). ``cached_vision_encoder`` (and ``cached_audio_encoder``, through
``cached_encoder``) keeps verified exports under ``cache_root() / "encoders"`` as
``rne_tools.export.cache`` keeps the text models': under a **program key** computed between the
halves (every method's traced graph with its weights, the constant methods, the report's
description of the program, the lowering code by meaning, the versions), so a refactor of the
encoder code that traces to the same graphs exports nothing again; a **recipe key** (the config,
the encoder's settings, the seed, the syntax of the code it runs: ``VISION_CODE``/``AUDIO_CODE``)
remembers which program an unchanged request resolved to, so an unchanged tree does not even
trace. The verdict carries the verification code's fingerprint; when that changes, the cached
program is verified again rather than exported again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypedDict, Unpack

import numpy as np
import torch
from tqdm import tqdm

from rne_tools.encoders.gemma4_reference import random_config, reference_model
from rne_tools.encoders.gemma4_vision import (
    SOFT_TOKEN_BUDGETS,
    VisionEncoder,
    for_xnnpack,
    reference_image_embeddings,
)
from rne_tools.errors import ExportError, VerificationError
from rne_tools.export.backends import BACKEND_CODES, ExportOptions, get_backend
from rne_tools.export.cache import content_key, locked
from rne_tools.export.fingerprint import code_fingerprint, graph_fingerprint, syntax_fingerprint
from rne_tools.export.lowering import Lowering, lower, lowering_fingerprint
from rne_tools.export.pipeline import stage
from rne_tools.files import write_atomically
from rne_tools.hashing import sha256_file
from rne_tools.paths import cache_root

METHOD = "vision_encoder"
# fp32 XNNPACK against fp32 eager: the text variants' bound (1e-3 x logit std), here relative to
# the standard deviation of the embeddings the decoder receives.
PARITY_BOUND = 1e-3
QUANTIZATIONS = ("fp32", "8w", "8da8w", "8da4w")
# max |diff| of the program against its eager reference (transformers' for fp32, the eager
# encoder with the same quantized weights otherwise) over std(reference embeddings). 8w computes
# what eager computes (int8 weights times their scales, float activations): fp32's bound.
# 8da8w/8da4w round the activations to int8 per token at run time, and XNNPACK's rounding is
# not torchao's eager one bit for bit: a value one level off moves by 1/255 of its row's range,
# and the layers after carry it on (tiny model, 8da4w: 8.1% of the std); their bound is about
# twice that. At E2B's widths (2 layers, random weights) the audio 8da4w program is within it
# (7.8%) and the vision one is not (23.5%: it fails, docs/multimodal.md "Numbers").
PARITY_BOUNDS = {"fp32": PARITY_BOUND, "8w": PARITY_BOUND, "8da8w": 0.15, "8da4w": 0.15}
# Probe pictures (height, width): 4:3, square, a strip that fills the budget, a small picture
# scaled up and a 2-pixel line (one row of soft tokens, about half the rows padding). Each goes
# through the processor, so each has its own soft-token count and padding.
PROBE_SIZES = ((300, 400), (256, 256), (40, 700), (23, 17), (2, 150))

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
# The code an encoder's export runs, for its recipe key: the shared machinery and reference
# model, the XNNPACK lowering and quantization they reuse, the keys' own code, and each
# encoder's own modules (so editing one encoder keeps the other's recipes).
SHARED_CODE = (
    "encoders/export.py",
    "encoders/gemma4_reference.py",
    "export/backends/__init__.py",
    "export/backends/xnnpack.py",
    "export/backends/xnnpack_ops.py",
    "export/quantize.py",
    "export/cache.py",
    "export/fingerprint.py",
)
VISION_CODE = (*SHARED_CODE, "encoders/gemma4_vision.py")


@dataclass(frozen=True)
class EncoderExportResult:
    pte_path: Path
    report_path: Path
    report: dict[str, Any]


VisionExportResult = EncoderExportResult
# An exported method: the module and its example inputs (static shapes).
Methods = dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]


@dataclass(frozen=True)
class EncoderTrace:
    """An encoder export up to lowering (``trace_encoder``): what its program key is computed
    from, and what ``finish_encoder_export`` lowers, verifies and describes."""

    stem: str
    exported: dict[str, torch.export.ExportedProgram]
    # The constant methods, get_backend included.
    constants: dict[str, Any]
    # The report's description of the program (config, shapes, limits).
    describe: dict[str, Any]
    quantization: str
    # What the program should compute, for the verification's error.
    what: str
    # The written program -> its verification (``summarize``'s dict).
    verify: Callable[[Path], dict[str, Any]]
    # The linears the quantization left in float.
    float_linears: list[str]
    timings: dict[str, float]


def probe_picture(height: int, width: int, seed: int) -> np.ndarray:
    """A smooth gradient with a share of per-pixel noise: uint8 RGB ``[height, width, 3]``."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1),
                     (x + y) * 7 % 256], axis=-1)
    noise = rng.integers(0, 256, (height, width, 3))
    return np.where(rng.random((height, width, 1)) < 0.3, noise, base).astype(np.uint8)


def preprocess(picture: np.ndarray, max_soft_tokens: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """transformers' Gemma 4 image processor (the PIL one): pixel values, position ids, count."""
    from PIL import Image
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    out = Gemma4ImageProcessorPil(max_soft_tokens=max_soft_tokens)(
        Image.fromarray(picture, "RGB"), return_tensors="pt")
    return (out["pixel_values"], out["image_position_ids"],
            int(out["num_soft_tokens_per_image"][0]))


def row_cosines(rows: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """Cosine of each soft token's row with the reference's: the worst and the mean."""
    cos = torch.nn.functional.cosine_similarity(rows.double(), reference.double(), dim=-1)
    return {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean())}


def agreement(rows: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """How far ``rows`` are from transformers' fp32 ``reference``: max |diff|, over the
    reference's std, and the row cosines."""
    scale = float(reference.std())
    diff = float((rows - reference).abs().max())
    return {"max_abs_diff": diff, "relative": diff / scale, **row_cosines(rows, reference)}


def compare(program_out: torch.Tensor, reference: torch.Tensor,
            bound: float = PARITY_BOUND) -> dict[str, Any]:
    """Parity of one picture: the real rows against ``reference`` (transformers' rows, or a
    quantized program's eager encoder's; max |diff| within ``bound`` x their std), and the
    padding rows' size."""
    count = reference.shape[0]
    scale = float(reference.std())
    diff = float((program_out[:count] - reference).abs().max())
    padding = float(program_out[count:].abs().max()) if program_out.shape[0] > count else 0.0
    return {
        "num_soft_tokens": count,
        "max_abs_diff": diff,
        "reference_std": scale,
        "relative": diff / scale,
        **row_cosines(program_out[:count], reference),
        "max_abs_padding": padding,
        "passed": diff <= bound * scale and padding == 0.0,
    }


def check_quantization(quantization: str) -> float:
    """The verification bound of ``quantization``; ``ExportError`` for one encoders do not take."""
    if quantization not in PARITY_BOUNDS:
        raise ExportError(
            f"quantization {quantization!r} is not one the encoders take; use one of "
            f"{', '.join(QUANTIZATIONS)}."
        )
    return PARITY_BOUNDS[quantization]


class BiasAfterLinear(torch.nn.Module):
    """``linear(x) + bias`` with the bias added after a bias-free linear: XNNPACK lowers a
    linear with int8 weights and float activations (8w) only without a bias (with one it wants
    a quantized input). The same function."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(linear.in_features, linear.out_features, bias=False,
                                      device="meta")
        self.linear.weight = linear.weight
        self.bias = torch.nn.Parameter(linear.bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.bias


def _split_biases(module: torch.nn.Module) -> None:
    """Every biased ``nn.Linear`` of ``module`` as a ``BiasAfterLinear``, in place."""
    targets = [(name, m) for name, m in module.named_modules()
               if isinstance(m, torch.nn.Linear) and m.bias is not None]
    for name, linear in targets:
        parent, _, attr = name.rpartition(".")
        setattr(module.get_submodule(parent), attr, BiasAfterLinear(linear))


def quantized_reference(encoder: torch.nn.Module, quantization: str,
                        keep_float: tuple[str, ...] = ()) -> tuple[torch.nn.Module | None,
                                                                   list[str]]:
    """``quantize_encoder`` of ``encoder`` in place; returns the eager reference of its program
    (the quantized encoder itself; None for fp32, whose reference is transformers' model) and
    the linears left in float."""
    skipped = quantize_encoder(encoder, quantization, keep_float)
    return (None if quantization == "fp32" else encoder), skipped


def quantize_encoder(module: torch.nn.Module, quantization: str,
                     keep_float: tuple[str, ...] = ()) -> list[str]:
    """Quantize ``module``'s linears in place with the text exporter's torchao functions
    (``rne_tools.export.quantize``), except those inside the submodules named in
    ``keep_float``. Returns the linears left in float (a grouped 4-bit weight needs the group
    size to divide its input width)."""
    from rne_tools.export.quantize import quantize_8da4w, quantize_8da8w, quantize_8w

    check_quantization(quantization)
    if quantization == "fp32":
        return []
    kept = {name: module.get_submodule(name) for name in keep_float}
    for name in kept:
        parent, _, attr = name.rpartition(".")
        setattr(module.get_submodule(parent), attr, torch.nn.Identity())
    try:
        _split_biases(module)
        # No embedding tables in the quantized parts: the position tables are parameters.
        quantizer = {"8w": quantize_8w, "8da8w": quantize_8da8w, "8da4w": quantize_8da4w}
        skipped = quantizer[quantization](module, embedding_quantization="none")
    finally:
        for name, child in kept.items():
            parent, _, attr = name.rpartition(".")
            setattr(module.get_submodule(parent), attr, child)
    module.requires_grad_(False)
    return skipped


def _check_budget(max_soft_tokens: int) -> None:
    if max_soft_tokens not in SOFT_TOKEN_BUDGETS:
        raise ExportError(
            f"max_soft_tokens={max_soft_tokens} is not a budget Gemma 4's image processor "
            f"takes; use one of {', '.join(map(str, SOFT_TOKEN_BUDGETS))}."
        )


# The XNNPACK backend reads no option for fp32 lowering; the fields describe this program.
_LOWERING_OPTIONS = ExportOptions(model_id="gemma4_encoder", architecture="gemma4",
                                  backend="xnnpack", quantization="fp32", max_context=1,
                                  max_chunk=1)


def _lowering() -> Lowering:
    """The project's XNNPACK partitioners; the caller's buffers are the inputs (the runner
    passes the preprocessed tensor)."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    backend = get_backend("xnnpack")
    return Lowering(
        partitioners=backend.partitioners(_LOWERING_OPTIONS),
        compile_config=backend.compile_config(),
        emit_config=ExecutorchBackendConfig(
            extract_delegate_segments=True,
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
        ),
    )


def summarize(probes: list[dict[str, Any]], bound: str) -> dict[str, Any]:
    """A verification from per-probe comparisons (``compare``'s dicts): the worst one's numbers
    and the worst row cosine."""
    worst = max(probes, key=lambda p: p["relative"])
    passed = all(p["passed"] for p in probes)
    return {
        "status": "match" if passed else "mismatch",
        "passed": passed,
        "bound": bound,
        "max_abs_diff": worst["max_abs_diff"],
        "reference_std": worst["reference_std"],
        "relative": worst["relative"],
        "min_cosine": min(p["min_cosine"] for p in probes),
        # A quantized program's probes carry their agreement with fp32; an fp32 one's is the
        # comparison itself.
        "fp32_agreement": {
            "relative": max(p.get("fp32_agreement", p)["relative"] for p in probes),
            "min_cosine": min(p.get("fp32_agreement", p)["min_cosine"] for p in probes),
            "mean_cosine": float(np.mean([p.get("fp32_agreement", p)["mean_cosine"]
                                          for p in probes])),
        },
        "probes": probes,
    }


def load_runtime(pte: Path) -> Any:
    """The program on the ExecuTorch Python runtime, with the quantized kernels registered (for
    what of a quantized program stays outside XNNPACK)."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.runtime import Runtime

    return Runtime.get().load_program(pte)


def _verify(pte: Path, model: torch.nn.Module, max_soft_tokens: int, quantization: str,
            quantized: torch.nn.Module | None) -> dict[str, Any]:
    """``quantized``: the eager encoder with the program's quantized weights (None for fp32,
    whose reference is transformers' own)."""
    bound = check_quantization(quantization)
    method = load_runtime(pte).load_method(METHOD)
    probes = []
    for i, (height, width) in enumerate(PROBE_SIZES):
        pixels, positions, _ = preprocess(probe_picture(height, width, seed=i), max_soft_tokens)
        ours = method.execute((pixels, positions))[0]
        reference = reference_image_embeddings(model, pixels, positions)
        if quantized is None:
            probes.append({"size": [height, width], **compare(ours, reference, bound)})
            continue
        with torch.no_grad():
            eager = quantized(pixels, positions)[: reference.shape[0]]
        probes.append({"size": [height, width], **compare(ours, eager, bound),
                       "fp32_agreement": agreement(ours[: reference.shape[0]], reference)})
    against = "transformers' eager" if quantized is None else "the quantized eager encoder"
    return summarize(
        probes, f"{quantization}: max |diff| against {against} <= {bound} x std(its "
        "embeddings); padding rows == 0")


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "executorch", "torchao", "transformers")}


def trace_encoder(stem: str, methods: Methods, constants: dict[str, Any], *, started: float,
                  config: str, seed: int, model: torch.nn.Module, quantization: str,
                  quantized: tuple[torch.nn.Module | None, list[str]],
                  describe: dict[str, Any], what: str, verify: Callable[..., dict[str, Any]],
                  verify_options: dict[str, Any]) -> EncoderTrace:
    """``torch.export`` each of ``methods`` (static shapes), built since ``started``
    (``time.perf_counter()``) from the reference ``model`` of ``config`` and ``seed``;
    ``quantized``: ``quantized_reference``'s answer; ``verify(pte, model=, quantization=,
    quantized=, **verify_options)`` checks the written program."""
    reference, float_linears = quantized
    describe = {"model": f"gemma4:{config}", "random_config": random_config(config).as_dict(),
                "seed": seed, **describe}
    check = partial(verify, model=model, quantization=quantization, quantized=reference,
                    **verify_options)
    timings = {"load": round(time.perf_counter() - started, 3)}
    start = time.perf_counter()
    with torch.no_grad():
        exported = {name: torch.export.export(module, example, strict=False)
                    for name, (module, example) in methods.items()}
    timings["export"] = round(time.perf_counter() - start, 3)
    return EncoderTrace(stem, exported, {**constants, "get_backend": BACKEND_CODES["xnnpack"]},
                        describe, quantization, what, check, float_linears, timings)


def _verified(traced: EncoderTrace, pte: Path, consequence: str) -> dict[str, Any]:
    """``traced.verify`` of the program at ``pte``; ``VerificationError`` (ending with
    ``consequence``) unless it passed."""
    verification = {**traced.verify(pte), "float_linears": traced.float_linears}
    if not verification["passed"]:
        raise VerificationError(
            f"{traced.stem}.pte does not compute {traced.what}: max |diff| "
            f"{verification['max_abs_diff']:.3g} against a reference std of "
            f"{verification['reference_std']:.3g} (bound {verification['bound']}). {consequence}"
        )
    return verification


def finish_encoder_export(traced: EncoderTrace, output_dir: Path, *, progress: bool = True,
                          report_extra: dict[str, Any] | None = None) -> EncoderExportResult:
    """Lower ``traced``, serialise and verify the program; then write the report
    (``traced.describe``, ``report_extra`` and the file, delegation, timings, verification and
    versions) and the program, both only when the verification passed (``VerificationError``
    otherwise)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pte_path = output_dir / f"{traced.stem}.pte"
    report_path = output_dir / f"{traced.stem}.report.json"
    tmp_pte = output_dir / f".{traced.stem}.pte.tmp-{os.getpid()}"
    timings = dict(traced.timings)
    try:
        with tqdm(total=3, disable=not progress, desc="export") as bar:
            with stage(bar, "lower", timings):
                program = lower(traced.exported, _lowering(), traced.constants)
                delegation = _delegation(program, list(traced.exported))
            with stage(bar, "serialize", timings):
                with tmp_pte.open("wb") as f:
                    program.write_to_file(f)
                del program
            with stage(bar, "verify", timings):
                verification = _verified(traced, tmp_pte, "Nothing was written.")
        report = {
            **traced.describe,
            "backend": "xnnpack",
            "quantization": traced.quantization,
            "file": pte_path.name,
            "size": tmp_pte.stat().st_size,
            "sha256": sha256_file(tmp_pte),
            "delegation": delegation,
            "export_seconds": round(sum(timings.values()), 2),
            "stage_seconds": timings,
            "verification": verification,
            "versions": versions(),
            **(report_extra or {}),
        }
        write_atomically(report_path, json.dumps(report, indent=2) + "\n")
        tmp_pte.replace(pte_path)
    finally:
        tmp_pte.unlink(missing_ok=True)
    return EncoderExportResult(pte_path, report_path, report)


def vision_stem(config: str, quantization: str, max_soft_tokens: int) -> str:
    return f"gemma4_{config}_vision_xnnpack_{quantization}_{max_soft_tokens}"


def trace_vision_encoder(config: str, *, max_soft_tokens: int = 280, quantization: str = "fp32",
                         seed: int = 0) -> EncoderTrace:
    """The vision encoder of the random multimodal ``config``, quantized and traced. Raises
    ``ExportError`` on bad options."""
    _check_budget(max_soft_tokens)
    check_quantization(quantization)
    started = time.perf_counter()
    mm = random_config(config)
    # The processor caps a picture's long side at max_soft_tokens * pooling patches; a
    # coordinate past the position table would be an out-of-range lookup on the device.
    longest = max_soft_tokens * mm.vision["pooling_kernel_size"]
    if longest > mm.vision["position_embedding_size"]:
        raise ExportError(
            f"max_soft_tokens={max_soft_tokens} allows patch coordinates up to {longest - 1}, "
            f"past config {config!r}'s position table of {mm.vision['position_embedding_size']}; "
            "use a smaller budget."
        )
    kernel = mm.vision["pooling_kernel_size"]
    patch = mm.vision["patch_size"]
    model = reference_model(config, seed)
    encoder = for_xnnpack(VisionEncoder(model).eval())
    # transformers reads the patch embedding's weight dtype: that linear stays float.
    quantized = quantized_reference(encoder, quantization, keep_float=("tower.patch_embedder",))
    example = preprocess(probe_picture(300, 400, seed=0), max_soft_tokens)[:2]
    text_hidden = model.config.text_config.hidden_size
    return trace_encoder(
        vision_stem(config, quantization, max_soft_tokens),
        {METHOD: (encoder, example)},
        {
            "vision_max_soft_tokens": max_soft_tokens,
            "vision_patch_size": patch,
            "vision_pooling_kernel_size": kernel,
            "vision_text_hidden": text_hidden,
        },
        started=started, config=config, seed=seed, model=model, quantization=quantization,
        quantized=quantized,
        describe={
            "method": METHOD,
            "max_soft_tokens": max_soft_tokens,
            "max_patches": max_soft_tokens * kernel * kernel,
            "patch_dim": 3 * patch ** 2,
            "text_hidden": text_hidden,
        },
        what="transformers' image features",
        verify=VISION.verifier, verify_options={"max_soft_tokens": max_soft_tokens},
    )


def export_vision_encoder(config: str, output_dir: Path, *, max_soft_tokens: int = 280,
                          quantization: str = "fp32", seed: int = 0,
                          progress: bool = True) -> EncoderExportResult:
    """Export, lower and verify the vision encoder of the random multimodal ``config`` into
    ``output_dir`` (``<stem>.pte`` and ``<stem>.report.json``). Raises ``ExportError`` on bad
    options and ``VerificationError`` when the program disagrees with transformers (nothing is
    written then)."""
    traced = trace_vision_encoder(config, max_soft_tokens=max_soft_tokens,
                                  quantization=quantization, seed=seed)
    return finish_encoder_export(traced, output_dir, progress=progress)


def _delegation(program: Any, methods: list[str]) -> dict[str, Any]:
    """Share of the program's compute nodes inside XNNPACK (over all its methods, and per
    method); ops left to portable kernels."""
    from executorch.devtools.backend_debug import get_delegation_info

    per_method: dict[str, dict[str, Any]] = {}
    for method in methods:
        info = get_delegation_info(program.exported_program(method).graph_module)
        ops = {op: b for op, b in info.delegation_by_operator.items()
               if op not in ("getitem", "sym_size", "alloc")}
        per_method[method] = {
            "delegated_subgraphs": info.num_delegated_subgraphs,
            "delegated_nodes": sum(b.delegated for b in ops.values()),
            "non_delegated_nodes": sum(b.non_delegated for b in ops.values()),
            "cpu_ops": {op: b.non_delegated for op, b in sorted(ops.items()) if b.non_delegated},
        }
    for entry in per_method.values():
        total = entry["delegated_nodes"] + entry["non_delegated_nodes"]
        entry["delegated_share"] = round(entry["delegated_nodes"] / total, 4) if total else 0.0
    delegated = sum(e["delegated_nodes"] for e in per_method.values())
    cpu = sum(e["non_delegated_nodes"] for e in per_method.values())
    cpu_ops: dict[str, int] = {}
    for entry in per_method.values():
        for op, count in entry["cpu_ops"].items():
            cpu_ops[op] = cpu_ops.get(op, 0) + count
    return {
        "delegated_subgraphs": sum(e["delegated_subgraphs"] for e in per_method.values()),
        "delegated_nodes": delegated,
        "non_delegated_nodes": cpu,
        "delegated_share": round(delegated / (delegated + cpu), 4) if delegated + cpu else 0.0,
        "cpu_ops": dict(sorted(cpu_ops.items())),
        "methods": per_method,
    }


def _code_fingerprint(code: tuple[str, ...]) -> str:
    """The syntax trees of ``code`` (paths under this package)."""
    files = []
    for entry in code:
        path = _PACKAGE_ROOT / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return syntax_fingerprint(files, _PACKAGE_ROOT)


def encoder_lowering_fingerprint() -> str:
    """How the traced methods become the program and its report (see
    ``lowering.lowering_fingerprint``)."""
    backend = get_backend("xnnpack")
    return lowering_fingerprint(_lowering(), _delegation, backend.partitioners,
                                backend.compile_config)


def encoder_program_key(traced: EncoderTrace) -> str:
    """``<stem>-<hash>`` of what determines ``traced``'s program: each method's traced graph and
    weights, the constant methods, the description its report carries, the lowering code and
    the versions."""
    return content_key(traced.stem, {
        "graphs": {name: graph_fingerprint(ep) for name, ep in sorted(traced.exported.items())},
        "constants": traced.constants,
        "describe": traced.describe,
        "quantization": traced.quantization,
        "lowering": encoder_lowering_fingerprint(),
        "versions": versions(),
    })


def _stored(out: Path, stem: str) -> EncoderExportResult | None:
    pte, report = out / f"{stem}.pte", out / f"{stem}.report.json"
    if pte.is_file() and report.is_file():
        return EncoderExportResult(pte, report, json.loads(report.read_text()))
    return None


def _reverify(stored: EncoderExportResult, traced: EncoderTrace,
              checks: str) -> EncoderExportResult:
    """Verify a cached program again under the current verification code; rewrite its report."""
    verification = _verified(traced, stored.pte_path, "Export it again after fixing the "
                             "verification or the encoder.")
    report = {**stored.report, "verification": verification, "check_fingerprint": checks}
    write_atomically(stored.report_path, json.dumps(report, indent=2) + "\n")
    return EncoderExportResult(stored.pte_path, stored.report_path, report)


@dataclass(frozen=True)
class Encoder:
    """What the cache needs to know of one encoder's exports."""

    # The code its exports run (the recipe key).
    code: tuple[str, ...]
    # The function its ``EncoderTrace.verify`` calls (the verdict's fingerprint).
    verifier: Callable[..., dict[str, Any]]
    # (its one option) -> None, ``ExportError`` for a value it does not take.
    check: Callable[[int], object]
    # (config, quantization, **options) -> the program's file stem.
    stem: Callable[..., str]
    # (config, quantization=, seed=, **options) -> the traced export.
    trace: Callable[..., EncoderTrace]


def encoder_recipe_key(encoder: Encoder, config: str, options: dict[str, int], *,
                       quantization: str, seed: int) -> tuple[str, str]:
    """The program's file stem, and ``<stem>-<hash>`` of what the export is asked for (the
    config, the encoder's option, the quantization, the seed), the syntax of the code it runs
    and the versions. ``ExportError`` for an option the encoder does not take."""
    (value,) = options.values()
    encoder.check(value)
    check_quantization(quantization)
    stem = encoder.stem(config, quantization, **options)
    return stem, content_key(stem, {
        "config": random_config(config).as_dict(), **options, "quantization": quantization,
        "seed": seed, "code": _code_fingerprint(encoder.code), "versions": versions(),
    })


class CacheRequest(TypedDict, total=False):
    """``cached_encoder``'s options common to every encoder."""

    quantization: str
    seed: int
    cache_dir: Path | None
    progress: bool


def cached_encoder(encoder: Encoder, config: str, options: dict[str, int], *,
                   quantization: str = "fp32", seed: int = 0, cache_dir: Path | None = None,
                   progress: bool = True) -> EncoderExportResult:
    """The verified export of ``encoder`` (``options``: its own option) from
    ``<cache>/encoders/<program key>/``, made there first if no export of the same program
    exists. An unchanged request on an unchanged tree finds it by its recipe key, untraced."""
    stem, recipe_name = encoder_recipe_key(encoder, config, options, quantization=quantization,
                                           seed=seed)
    root = (cache_root() if cache_dir is None else Path(cache_dir)) / "encoders"
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    recipe = root / "recipes" / recipe_name
    checks = code_fingerprint(encoder.verifier)
    with locked(root / "recipes" / f".{recipe.name}.lock"):
        found = _stored(root / recipe.read_text().strip(), stem) if recipe.is_file() else None
        if found is not None and found.report.get("check_fingerprint") == checks:
            return found
        traced = encoder.trace(config, quantization=quantization, seed=seed, **options)
        key = encoder_program_key(traced)
        with locked(root / f"{key}.lock"):
            stored = _stored(root / key, stem)
            if stored is None:
                stored = finish_encoder_export(
                    traced, root / key, progress=progress,
                    report_extra={"program_key": key, "check_fingerprint": checks})
            elif stored.report.get("check_fingerprint") != checks:
                stored = _reverify(stored, traced, checks)
        write_atomically(recipe, key + "\n")
        return stored


VISION = Encoder(VISION_CODE, _verify, _check_budget, vision_stem, trace_vision_encoder)


def cached_vision_encoder(config: str, *, max_soft_tokens: int = 280,
                          **request: Unpack[CacheRequest]) -> EncoderExportResult:
    """``export_vision_encoder`` through ``cached_encoder``: into
    ``<cache>/encoders/<program key>/``, or the verified export already there."""
    return cached_encoder(VISION, config, {"max_soft_tokens": max_soft_tokens}, **request)

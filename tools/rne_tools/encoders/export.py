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

``cached_vision_encoder`` (and ``cached_audio_encoder``, through ``cached_export``) keeps
verified exports under ``cache_root() / "encoders"``, keyed on the config, the encoder's settings,
the seed, the code of the shared machinery and of that encoder's modules (``VISION_CODE``), the
XNNPACK lowering code it reuses and the package versions, as ``rne_tools.export.cache`` does for
the text models.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from rne_tools.export.fingerprint import syntax_fingerprint
from rne_tools.export.pipeline import stage
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
# The code that decides what an encoder's export is: the shared machinery and reference model,
# the XNNPACK lowering they reuse, and each encoder's own modules (so editing one encoder keeps
# the other's cache).
SHARED_CODE = (
    "encoders/export.py",
    "encoders/gemma4_reference.py",
    "export/backends/__init__.py",
    "export/backends/xnnpack.py",
    "export/backends/xnnpack_ops.py",
    "export/quantize.py",
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


def _lower(methods: Methods, constants: dict[str, Any]) -> Any:
    """torch.export each method (static shapes), lower with the project's XNNPACK partitioners,
    emit one program."""
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass

    from rne_tools.export.backends import ExportOptions, get_backend

    backend = get_backend("xnnpack")
    # The XNNPACK backend reads no option for fp32 lowering; the fields describe this program.
    options = ExportOptions(model_id="gemma4_encoder", architecture="gemma4", backend="xnnpack",
                            quantization="fp32", max_context=1, max_chunk=1)
    with torch.no_grad():
        exported = {name: torch.export.export(module, example, strict=False)
                    for name, (module, example) in methods.items()}
    edge = to_edge_transform_and_lower(
        exported,
        partitioner=backend.partitioners(options),
        compile_config=backend.compile_config(),
        constant_methods=constants,
    )
    return edge.to_executorch(
        ExecutorchBackendConfig(
            extract_delegate_segments=True,
            # The caller's buffers are the inputs (the runner passes the preprocessed tensor).
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
        )
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


def export_program(
    output_dir: Path,
    stem: str,
    *,
    load: Callable[[], tuple[Methods, dict[str, Any]]],
    verify: Callable[[Path], dict[str, Any]],
    describe: dict[str, Any],
    what: str,
    quantization: str = "fp32",
    progress: bool = True,
) -> EncoderExportResult:
    """The steps every encoder export takes: ``load`` (the methods and the constant methods),
    export and lower, serialise, ``verify`` the written program; then the report
    (``describe`` plus the file, delegation, timings, verification and versions) and the
    program, both written only when the verification passed (``VerificationError`` otherwise:
    ``what`` names what the program should compute)."""
    start = time.perf_counter()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pte_path, report_path = output_dir / f"{stem}.pte", output_dir / f"{stem}.report.json"
    tmp_pte = output_dir / f".{stem}.pte.tmp-{os.getpid()}"
    timings: dict[str, float] = {}
    try:
        with tqdm(total=4, disable=not progress, desc="export") as bar:
            with stage(bar, "load", timings):
                methods, constants = load()
            with stage(bar, "export+lower", timings):
                program = _lower(methods, {**constants, "get_backend": _backend_code()})
                delegation = _delegation(program, list(methods))
                del methods
            with stage(bar, "serialize", timings):
                with tmp_pte.open("wb") as f:
                    program.write_to_file(f)
                del program
            with stage(bar, "verify", timings):
                verification = verify(tmp_pte)
        report = {
            **describe,
            "backend": "xnnpack",
            "quantization": quantization,
            "file": pte_path.name,
            "size": tmp_pte.stat().st_size,
            "sha256": sha256_file(tmp_pte),
            "delegation": delegation,
            "export_seconds": round(time.perf_counter() - start, 2),
            "stage_seconds": timings,
            "verification": verification,
            "versions": versions(),
        }
        if not verification["passed"]:
            raise VerificationError(
                f"{pte_path.name} does not compute {what}: max |diff| "
                f"{verification['max_abs_diff']:.3g} against a reference std of "
                f"{verification['reference_std']:.3g} (bound {verification['bound']}). "
                "Nothing was written."
            )
        report_path.write_text(json.dumps(report, indent=2) + "\n")
        tmp_pte.replace(pte_path)
    finally:
        tmp_pte.unlink(missing_ok=True)
    return EncoderExportResult(pte_path, report_path, report)


def export_vision_encoder(config: str, output_dir: Path, *, max_soft_tokens: int = 280,
                          quantization: str = "fp32", seed: int = 0,
                          progress: bool = True) -> EncoderExportResult:
    """Export, lower and verify the vision encoder of the random multimodal ``config`` into
    ``output_dir`` (``<stem>.pte`` and ``<stem>.report.json``). Raises ``ExportError`` on bad
    options and ``VerificationError`` when the program disagrees with transformers (nothing is
    written then)."""
    _check_budget(max_soft_tokens)
    check_quantization(quantization)
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
    skipped: list[str] = []
    # The quantized eager encoder, the reference of a quantized program.
    quantized: list[torch.nn.Module] = []

    def load() -> tuple[Methods, dict[str, Any]]:
        encoder = for_xnnpack(VisionEncoder(model).eval())
        # transformers reads the patch embedding's weight dtype: that linear stays float.
        skipped.extend(quantize_encoder(encoder, quantization,
                                        keep_float=("tower.patch_embedder",)))
        if quantization != "fp32":
            quantized.append(encoder)
        example = preprocess(probe_picture(300, 400, seed=0), max_soft_tokens)[:2]
        constants = {
            "vision_max_soft_tokens": max_soft_tokens,
            "vision_patch_size": patch,
            "vision_pooling_kernel_size": kernel,
            "vision_text_hidden": model.config.text_config.hidden_size,
        }
        return {METHOD: (encoder, example)}, constants

    return export_program(
        output_dir, f"gemma4_{config}_vision_xnnpack_{quantization}_{max_soft_tokens}",
        load=load,
        verify=lambda pte: {**_verify(pte, model, max_soft_tokens, quantization,
                                      quantized[0] if quantized else None),
                            "float_linears": skipped},
        describe={
            "model": f"gemma4:{config}",
            "method": METHOD,
            "random_config": mm.as_dict(),
            "seed": seed,
            "max_soft_tokens": max_soft_tokens,
            "max_patches": max_soft_tokens * kernel * kernel,
            "patch_dim": 3 * patch ** 2,
            "text_hidden": model.config.text_config.hidden_size,
        },
        what="transformers' image features",
        quantization=quantization,
        progress=progress,
    )


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


def _backend_code() -> int:
    from rne_tools.export.backends import BACKEND_CODES

    return BACKEND_CODES["xnnpack"]


def _code_fingerprint(code: tuple[str, ...]) -> str:
    """The syntax trees of ``code`` (paths under this package): edits to comments, docstrings
    and formatting keep the cache; any change to what the code does invalidates it."""
    files = []
    for entry in code:
        path = _PACKAGE_ROOT / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return syntax_fingerprint(files, _PACKAGE_ROOT)


def encoder_cache_key(config: str, encoder: str, settings: dict[str, Any], seed: int,
                      code: tuple[str, ...]) -> str:
    """``gemma4_<config>_<encoder>-<hash>``: the config, the encoder's settings, the seed, its
    ``code`` and the package versions."""
    blob = json.dumps({
        "config": random_config(config).as_dict(),
        **settings,
        "seed": seed,
        "code": _code_fingerprint(code),
        "versions": versions(),
    }, sort_keys=True)
    return f"gemma4_{config}_{encoder}-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_key(config: str, max_soft_tokens: int, seed: int, quantization: str = "fp32") -> str:
    return encoder_cache_key(config, "vision", {"max_soft_tokens": max_soft_tokens,
                                                "quantization": quantization}, seed, VISION_CODE)


def cached_export(key: str, export: Callable[[Path], EncoderExportResult], *,
                  cache_dir: Path | None = None) -> EncoderExportResult:
    """``export(<cache>/encoders/<key>/)``, or the verified export already there. A file lock
    serialises concurrent callers."""
    root = (cache_root() if cache_dir is None else Path(cache_dir)) / "encoders"
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = root / key
        reports = sorted(out.glob("*.report.json")) if out.is_dir() else []
        if reports:
            report = json.loads(reports[0].read_text())
            pte = out / report["file"]
            if pte.is_file():
                return EncoderExportResult(pte, reports[0], report)
        return export(out)


def cached_vision_encoder(config: str, *, max_soft_tokens: int = 280,
                          quantization: str = "fp32", seed: int = 0,
                          cache_dir: Path | None = None,
                          progress: bool = True) -> EncoderExportResult:
    """``export_vision_encoder`` into ``<cache>/encoders/<key>/``, or the verified export
    already there."""
    _check_budget(max_soft_tokens)
    check_quantization(quantization)
    return cached_export(
        cache_key(config, max_soft_tokens, seed, quantization),
        lambda out: export_vision_encoder(config, out, max_soft_tokens=max_soft_tokens,
                                          quantization=quantization, seed=seed,
                                          progress=progress),
        cache_dir=cache_dir,
    )

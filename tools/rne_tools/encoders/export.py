"""Export Gemma 4's encoders to verified ``.pte`` programs: the machinery both share (lowering,
delegation report, verification gate, cache) and the vision encoder (the audio encoder's own
part is ``rne_tools.encoders.audio_export``).

The vision program (XNNPACK, fp32):

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

``cached_vision_encoder`` (and ``cached_audio_encoder``, through ``cached_export``) keeps
verified exports under ``cache_root() / "encoders"``, keyed on the config, the encoder's settings,
the seed, the code of the shared machinery and of that encoder's modules (``VISION_CODE``), the
XNNPACK lowering code it reuses and the package versions, as ``rne_tools.export.cache`` does for
the text models.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
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
from rne_tools.hashing import sha256_file
from rne_tools.paths import cache_root

METHOD = "vision_encoder"
# fp32 XNNPACK against fp32 eager: the text variants' bound (1e-3 x logit std), here relative to
# the standard deviation of the embeddings the decoder receives.
PARITY_BOUND = 1e-3
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


def compare(program_out: torch.Tensor, reference: torch.Tensor) -> dict[str, Any]:
    """Parity of one picture: the real rows against transformers, and the padding rows' size."""
    count = reference.shape[0]
    scale = float(reference.std())
    diff = float((program_out[:count] - reference).abs().max())
    padding = float(program_out[count:].abs().max()) if program_out.shape[0] > count else 0.0
    return {
        "num_soft_tokens": count,
        "max_abs_diff": diff,
        "reference_std": scale,
        "relative": diff / scale,
        "max_abs_padding": padding,
        "passed": diff <= PARITY_BOUND * scale and padding == 0.0,
    }


def _check_budget(max_soft_tokens: int) -> None:
    if max_soft_tokens not in SOFT_TOKEN_BUDGETS:
        raise ExportError(
            f"max_soft_tokens={max_soft_tokens} is not a budget Gemma 4's image processor "
            f"takes; use one of {', '.join(map(str, SOFT_TOKEN_BUDGETS))}."
        )


@contextlib.contextmanager
def _stage(bar: tqdm, name: str, timings: dict[str, float]) -> Iterator[None]:
    bar.set_description(name)
    start = time.perf_counter()
    yield
    timings[name] = round(time.perf_counter() - start, 3)
    bar.update(1)


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
    """A verification from per-probe comparisons (``compare``'s dicts): the worst one's numbers."""
    worst = max(probes, key=lambda p: p["relative"])
    passed = all(p["passed"] for p in probes)
    return {
        "status": "match" if passed else "mismatch",
        "passed": passed,
        "bound": bound,
        "max_abs_diff": worst["max_abs_diff"],
        "reference_std": worst["reference_std"],
        "relative": worst["relative"],
        "probes": probes,
    }


def _verify(pte: Path, model: torch.nn.Module, max_soft_tokens: int) -> dict[str, Any]:
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method(METHOD)
    probes = []
    for i, (height, width) in enumerate(PROBE_SIZES):
        pixels, positions, _ = preprocess(probe_picture(height, width, seed=i), max_soft_tokens)
        ours = method.execute((pixels, positions))[0]
        probes.append({"size": [height, width],
                       **compare(ours, reference_image_embeddings(model, pixels, positions))})
    return summarize(
        probes, f"max |diff| <= {PARITY_BOUND} x std(reference embeddings); padding rows == 0")


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
            with _stage(bar, "load", timings):
                methods, constants = load()
            with _stage(bar, "export+lower", timings):
                program = _lower(methods, {**constants, "get_backend": _backend_code()})
                delegation = _delegation(program, list(methods))
                del methods
            with _stage(bar, "serialize", timings):
                with tmp_pte.open("wb") as f:
                    program.write_to_file(f)
                del program
            with _stage(bar, "verify", timings):
                verification = verify(tmp_pte)
        report = {
            **describe,
            "backend": "xnnpack",
            "quantization": "fp32",
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
                          seed: int = 0, progress: bool = True) -> EncoderExportResult:
    """Export, lower and verify the vision encoder of the random multimodal ``config`` into
    ``output_dir`` (``<stem>.pte`` and ``<stem>.report.json``). Raises ``ExportError`` on bad
    options and ``VerificationError`` when the program disagrees with transformers (nothing is
    written then)."""
    _check_budget(max_soft_tokens)
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

    def load() -> tuple[Methods, dict[str, Any]]:
        encoder = for_xnnpack(VisionEncoder(model).eval())
        example = preprocess(probe_picture(300, 400, seed=0), max_soft_tokens)[:2]
        constants = {
            "vision_max_soft_tokens": max_soft_tokens,
            "vision_patch_size": patch,
            "vision_pooling_kernel_size": kernel,
            "vision_text_hidden": model.config.text_config.hidden_size,
        }
        return {METHOD: (encoder, example)}, constants

    return export_program(
        output_dir, f"gemma4_{config}_vision_xnnpack_fp32_{max_soft_tokens}",
        load=load,
        verify=lambda pte: _verify(pte, model, max_soft_tokens),
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
    """Hash of the syntax trees of ``code`` (paths under this package) without docstrings:
    comments, docstrings and formatting keep the cache; any change to what the code does
    invalidates it."""
    h = hashlib.sha256()
    for entry in code:
        path = _PACKAGE_ROOT / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            tree = ast.parse(file.read_text())
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant)
                        and isinstance(body[0].value.value, str)):
                    body[0] = ast.Pass()
            h.update(file.relative_to(_PACKAGE_ROOT).as_posix().encode())
            h.update(ast.dump(tree).encode())
    return h.hexdigest()


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


def cache_key(config: str, max_soft_tokens: int, seed: int) -> str:
    return encoder_cache_key(config, "vision", {"max_soft_tokens": max_soft_tokens}, seed,
                             VISION_CODE)


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


def cached_vision_encoder(config: str, *, max_soft_tokens: int = 280, seed: int = 0,
                          cache_dir: Path | None = None,
                          progress: bool = True) -> EncoderExportResult:
    """``export_vision_encoder`` into ``<cache>/encoders/<key>/``, or the verified export
    already there."""
    _check_budget(max_soft_tokens)
    return cached_export(
        cache_key(config, max_soft_tokens, seed),
        lambda out: export_vision_encoder(config, out, max_soft_tokens=max_soft_tokens,
                                          seed=seed, progress=progress),
        cache_dir=cache_dir,
    )

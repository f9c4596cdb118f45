"""Gemma 4's encoders at E2B's real widths and depths (random weights): per encoder and
quantization, the program's size, its export time, its agreement with transformers' fp32
eager model, the soft-token counts, the time to encode a picture and 10 s of audio through our
runner (the host CLIs ``rne_vision`` and ``rne_audio``: ``VisionEncoder`` / ``AudioEncoder``
on the ExecuTorch runtime) and the runner process's peak RSS; the same through transformers
eager, in a process of its own, for scale. Prints a table; ``--json`` also writes the numbers.
Asserts nothing.

    .venv/bin/python tools/benchmarks/encoder_benchmark.py [--config e2b] \\
        [--encoders vision,audio] [--quantizations fp32,8w,8da4w] [--runs 3] [--json OUT]

The programs come from the encoder cache (``tools/export_encoder.py --cached``): a missing one
is exported first (minutes at E2B's widths; the export time in the table is the one its report
recorded); one that fails its verification is listed as such and not timed. ``--config e2b``
is the full towers, ``e2b_2l`` the same widths at 2 layers per tower. The agreement columns
compare the rows our runner wrote with transformers' fp32 eager rows for the same picture or
clip; the choice per encoder is the smallest program no further from them than transformers'
own bfloat16 run of the same weights (docs/multimodal.md, "Quantization"). The vision program takes the processor's default budget (280 soft tokens); its
picture is a 4:3 photo-sized PNG (266 soft tokens at 280, 140 at 140). The audio program takes
30 s and always computes 30 s: a 10 s clip costs what a 30 s one does. Times are the median of
``--runs`` encodes after one warm-up run, each a fresh process (its load time apart).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path
from typing import Any

import click
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rne_tools.paths import REPO_ROOT  # noqa: E402

HOST_BIN = REPO_ROOT / "build" / "host" / "host"
PICTURE = (768, 1024)  # height, width: a 4:3 photo, scaled down to the budget
BUDGETS = (140, 280)  # the anchor's budget and the processor's default
AUDIO_SECONDS = 10


def _measured(cmd: list[str]) -> tuple[str, float, float]:
    """Run ``cmd`` through this script's ``--rusage-of`` wrapper: its stdout, wall seconds and
    the peak RSS (MB) of that process alone (``os.wait4``'s rusage of the one child)."""
    proc = subprocess.run([sys.executable, __file__, "--rusage-of", *cmd], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise click.ClickException(
            f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    lines = proc.stdout.strip().splitlines()
    usage = json.loads(lines[-1])
    return "\n".join(lines[:-1]), usage["wall_s"], usage["max_rss_mb"]


def _rusage_of(cmd: list[str]) -> None:
    """Run ``cmd``, pass its stdout through, then print its wall time and peak RSS as a JSON
    line."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(code)
    # Linux reports ru_maxrss in KiB.
    print(json.dumps({"wall_s": wall, "max_rss_mb": round(usage.ru_maxrss / 1024, 1)}),
          flush=True)


def _agreement(rows: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """max |diff| over the reference's std, and the worst and mean row cosine."""
    diff = float(np.abs(rows - reference).max()) / float(reference.std())
    cos = (rows * reference).sum(-1) / (np.linalg.norm(rows, axis=-1)
                                        * np.linalg.norm(reference, axis=-1))
    return {"relative": diff, "min_cosine": float(cos.min()), "mean_cosine": float(cos.mean())}


def _runner_times(binary: Path, pte: Path, media: Path, runs: int) -> dict[str, Any]:
    """Median encode time (the CLI's own ``encode_ms``), median process wall time and the
    largest peak RSS over ``runs`` runs after a warm-up; the rows it wrote."""
    if not binary.is_file():
        raise click.ClickException(
            f"{binary} is missing: build the host tools first (cmake -S "
            "packages/react-native-executorch/cpp -B build/host -G Ninja "
            "-DCMAKE_BUILD_TYPE=Release && cmake --build build/host).")
    encode, wall, rss = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs + 1):
            out, seconds, peak = _measured([str(binary), str(pte), str(media),
                                            str(Path(tmp) / "out.f32")])
            if i == 0:
                continue
            encode.append(json.loads(out.strip().splitlines()[-1])["encode_ms"] / 1000)
            wall.append(seconds)
            rss.append(peak)
        result = json.loads(out.strip().splitlines()[-1])
        rows = np.fromfile(Path(tmp) / "out.f32", np.float32).reshape(-1, result["hidden"])
    return {"encode_s": statistics.median(encode), "process_s": statistics.median(wall),
            "peak_rss_mb": max(rss), "runs": runs, "cli": result, "rows": rows}


def _eager_child(config: str, encoder: str, media: str, runs: int, out: str) -> None:
    """In its own process: transformers' eager encoder on ``media``; prints the median time,
    saves the fp32 rows to ``out`` (.npy) and prints how far the same model run in bfloat16
    (the checkpoints' dtype) is from them."""
    import torch

    from rne_tools.encoders.gemma4_reference import reference_model

    torch.manual_seed(0)
    model = reference_model(config)
    if encoder == "vision":
        from PIL import Image

        from rne_tools.encoders.export import preprocess
        from rne_tools.encoders.gemma4_vision import reference_image_embeddings

        pixels, positions, _ = preprocess(np.asarray(Image.open(media).convert("RGB")), 280)

        def run() -> torch.Tensor:
            return reference_image_embeddings(model, pixels.to(model.dtype), positions)
    else:
        from rne_tools.encoders.gemma4_audio import reference_audio_embeddings, reference_features

        with wave.open(media) as w:
            clip = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768

        def run() -> torch.Tensor:
            features, mask = reference_features(clip)
            return reference_audio_embeddings(model, features.to(model.dtype), mask)
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        rows = run()
        if i:
            times.append(time.perf_counter() - start)
    reference = rows.float().numpy()
    np.save(out, reference)
    model.to(torch.bfloat16)
    bf16 = _agreement(run().float().numpy(), reference)
    print(json.dumps({"encode_s": statistics.median(times), "threads": torch.get_num_threads(),
                      "bf16_agreement": bf16}))


def _eager_times(config: str, encoder: str, media: Path, runs: int) -> dict[str, Any]:
    """The eager child's numbers and peak RSS (its bf16 run comes after the timed ones, so the
    peak is the fp32 model's plus its bf16 copy at most), and its fp32 rows."""
    rows = media.with_suffix(".eager.npy")
    out, _, rss = _measured([sys.executable, __file__, "--eager-child", config, encoder,
                             str(media), str(runs), str(rows)])
    return {**json.loads(out.strip().splitlines()[-1]), "peak_rss_mb": rss,
            "rows": np.load(rows)}


def _write_media(tmp: Path) -> tuple[Path, Path]:
    from PIL import Image

    from rne_tools.encoders.audio_export import probe_clip
    from rne_tools.encoders.export import probe_picture

    picture = tmp / "picture.png"
    Image.fromarray(probe_picture(*PICTURE, seed=0), "RGB").save(picture)
    clip = tmp / "clip.wav"
    samples = probe_clip("mix", AUDIO_SECONDS * 16000, seed=0)
    with wave.open(str(clip), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype(np.int16).tobytes())
    return picture, clip


def _token_counts(picture: Path) -> dict[str, int]:
    from PIL import Image

    from rne_tools.encoders.export import preprocess

    rgb = np.asarray(Image.open(picture).convert("RGB"))
    return {str(b): preprocess(rgb, b)[2] for b in BUDGETS}


def _row(encoder: str, quantization: str, result: Any) -> dict[str, Any]:
    report = result.report
    return {
        "encoder": encoder,
        "quantization": quantization,
        "file": report["file"],
        "pte": str(result.pte_path),
        "size_mb": round(report["size"] / 1e6, 2),
        "export_s": report["export_seconds"],
        "delegated_share": report["delegation"]["delegated_share"],
        # Over the export's probes (5 pictures or clips), against transformers' fp32 eager.
        "export_fp32_agreement": report["verification"]["fp32_agreement"],
    }


def choose(rows: list[dict[str, Any]], bound: dict[str, float]) -> dict[str, Any] | None:
    """The smallest program whose rows are no further from fp32 eager than transformers' own
    bfloat16 run of the same weights (``bound``: its ``relative`` and ``min_cosine``)."""
    fits = [r for r in rows if r["agreement"]["relative"] <= bound["relative"]
            and r["agreement"]["min_cosine"] >= bound["min_cosine"]]
    return min(fits, key=lambda r: r["size_mb"], default=None)


def _table(rows: list[dict[str, Any]], eager: dict[str, Any]) -> str:
    head = ("| encoder | quantization | file MB | export s | max diff / std | worst cos | "
            "tokens | encode s | process s | peak RSS MB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        a, run = r["agreement"], r["runner"]
        lines.append(
            f"| {r['encoder']} | {r['quantization']} | {r['size_mb']:.1f} | "
            f"{r['export_s']:.0f} | {a['relative']:.2e} | {a['min_cosine']:.5f} | {r['tokens']} "
            f"| {run['encode_s']:.2f} | {run['process_s']:.2f} | {run['peak_rss_mb']:.0f} |")
    for encoder, e in eager.items():
        b = e["bf16_agreement"]
        lines.append(
            f"| {encoder} | transformers eager fp32 (bf16 run: {b['relative']:.2e}, "
            f"{b['min_cosine']:.5f}) | | | | | | {e['encode_s']:.2f} | | {e['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", default="e2b", show_default=True,
              help="Random multimodal config (rne_tools.encoders.gemma4_reference); e2b_2l is "
              "E2B's widths at 2 layers per tower.")
@click.option("--encoders", default="vision,audio", show_default=True)
@click.option("--quantizations", default="fp32,8w,8da4w", show_default=True)
@click.option("--runs", type=click.IntRange(1), default=3, show_default=True,
              help="Timed runs after one warm-up run.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None,
              help="Also write the numbers to this JSON file.")
def main(config: str, encoders: str, quantizations: str, runs: int,
         json_path: Path | None) -> None:
    """Encoder size, export time, agreement, tokens, time and peak RSS per quantization."""
    from rne_tools.encoders.audio_export import cached_audio_encoder
    from rne_tools.encoders.export import QUANTIZATIONS, cached_vision_encoder
    from rne_tools.errors import VerificationError

    wanted = [e for e in encoders.split(",") if e]
    quants = [q for q in quantizations.split(",") if q]
    for q in quants:
        if q not in QUANTIZATIONS:
            raise click.BadParameter(f"{q!r}; use some of {', '.join(QUANTIZATIONS)}",
                                     param_hint="--quantizations")
    rows: list[dict[str, Any]] = []
    eager: dict[str, Any] = {}
    choices: dict[str, str | None] = {}
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        picture, clip = _write_media(Path(tmp))
        counts = _token_counts(picture)
        for encoder in wanted:
            media = picture if encoder == "vision" else clip
            eager[encoder] = _eager_times(config, encoder, media, runs)
            reference = eager[encoder].pop("rows")
            click.echo(json.dumps({encoder: eager[encoder]}), err=True)
            mine = []
            for q in quants:
                try:
                    if encoder == "vision":
                        result = cached_vision_encoder(config, max_soft_tokens=280,
                                                       quantization=q)
                        binary = HOST_BIN / "rne_vision"
                        tokens = f"{counts['280']} (140: {counts['140']})"
                    else:
                        result = cached_audio_encoder(config, quantization=q)
                        binary = HOST_BIN / "rne_audio"
                        tokens = f"{AUDIO_SECONDS * 25} per {AUDIO_SECONDS} s"
                except VerificationError as e:
                    # A program that failed its verification is not timed; the table says so.
                    failed[f"{encoder} {q}"] = str(e)
                    click.echo(f"{encoder} {q}: {e}", err=True)
                    continue
                row = {**_row(encoder, q, result), "tokens": tokens,
                       "runner": _runner_times(binary, result.pte_path, media, runs)}
                row["agreement"] = _agreement(row["runner"].pop("rows"), reference)
                click.echo(json.dumps(row), err=True)
                mine.append(row)
            rows.extend(mine)
            chosen = choose(mine, eager[encoder]["bf16_agreement"])
            choices[encoder] = chosen["file"] if chosen else None
    click.echo(f"config {config}; {os.cpu_count()} CPUs (shared: other jobs ran beside these)")
    click.echo(_table(rows, eager))
    for name, why in failed.items():
        click.echo(f"{name}: no program (failed its verification): {why}")
    for encoder, file in choices.items():
        click.echo(f"{encoder}: smallest program no further from fp32 than bf16 eager: "
                   f"{file or 'none of ' + ', '.join(quants)}")
    if json_path is not None:
        json_path.write_text(json.dumps({"config": config, "token_counts": counts, "rows": rows,
                                         "eager": eager, "choices": choices, "failed": failed},
                                        indent=2) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rusage-of":
        _rusage_of(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--eager-child":
        _eager_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
    else:
        main()

"""Several conversations over one loaded model (issue 60): what each session after the first
adds to resident memory, against its own KV caches and activations, and what switching between
sessions costs. Asserts nothing.

For each model, ``rne_sessions`` (cpp/host/rne_sessions.cpp) loads it, creates ``--sessions``
sessions with ``LlmRunner::new_session`` (the weights are packed once, through XNNPACK's weight
cache) and reports the anonymous resident memory each one added (heap and arenas; the mapped
program is file memory, shared) against the session's planned arenas, the memory-planned KV
caches and activations of its program. Then a ``--context``-token conversation in session 1, a
turn of session 2, and session 1's next turn: its time to first token after the switch, against
the same turn with no switch, and against prefilling the conversation again (what one runner
shared by two conversations would pay per switch).

Models: SmolLM2-135M (the registry's XNNPACK fp32 and 8da4w exports) and an E2B-width Gemma 4
(E2B's widths and 262,144-token head at a few layers, random weights): an existing export of
verify_cost_benchmark.py under build/benchmarks/verify/ is reused; without one, it is exported
(about 15 minutes), or pass ``--e2b`` a .pte.

    .venv/bin/python tools/benchmarks/multi_session_benchmark.py [--context 2000] [--e2b x.pte]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.runner_benchmark import BUILD_DIR, default_model, run_json  # noqa: E402
from rne_tools.paths import PACKAGE_DIR, REPO_ROOT  # noqa: E402
from rne_tools.runtime.quiet import configure_python_noise  # noqa: E402

configure_python_noise()


def ensure_rne_sessions(build_dir: Path) -> Path:
    """Configure (when new) and build rne_sessions in ``build_dir``."""
    cmake = REPO_ROOT / ".venv" / "bin" / "cmake"
    if not (build_dir / "CMakeCache.txt").is_file():
        subprocess.run([cmake, "-S", PACKAGE_DIR / "cpp", "-B", build_dir, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=sys.stderr)
    subprocess.run([cmake, "--build", build_dir, "-j", "2", "--target", "rne_sessions"],
                   check=True, stdout=sys.stderr)
    return build_dir / "host" / "rne_sessions"


def e2b_width_export() -> Path:
    """The fewest-layer E2B-width export verify_cost_benchmark.py left, else a new 4-layer one."""
    found = sorted((REPO_ROOT / "build" / "benchmarks" / "verify").glob("l*-gemma4_e2b_xnnpack_*/*.pte"),
                   key=lambda p: int(p.parent.name[1:].split("-")[0]))
    if found:
        return found[0]
    from benchmarks.verify_cost_benchmark import export_e2b

    return export_e2b(4, 8)


def mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


@click.command()
@click.option("--context", default=2000, show_default=True, help="Tokens of the switched conversation.")
@click.option("--sessions", default=3, show_default=True, help="Sessions per model (>= 2).")
@click.option("--e2b", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="An E2B-width Gemma 4 .pte (default: see above).")
@click.option("--build-dir", type=click.Path(file_okay=False, path_type=Path), default=BUILD_DIR,
              show_default=True, help="The host CMake build to build rne_sessions in.")
def main(context: int, sessions: int, e2b: Path | None, build_dir: Path) -> None:
    binary = ensure_rne_sessions(build_dir.resolve())
    smollm2 = {q: default_model(q) for q in ("fp32", "8da4w")}
    tokenizer = smollm2["fp32"][1]  # any tokenizer within the model's vocabulary: ids are fed
    runs = [(f"SmolLM2-135M {q}", pte) for q, (pte, _) in smollm2.items()]
    runs.append(("Gemma 4 E2B width", e2b or e2b_width_export()))
    print(f"\nSessions over one loaded model, {sessions} sessions; memory in MB (10^6 bytes), "
          "anonymous resident memory (RssAnon)")
    print(f"{'model':<22} {'1st load':>9} {'session':>8} {'added':>17} {'ratio':>11} {'create ms':>10}")
    switches = []
    for name, pte in runs:
        r = run_json(binary, "--model", pte, "--tokenizer", tokenizer, "--sessions", sessions,
                     "--context", context)
        added = r["added_bytes"]
        ratios = [a / r["session_bytes"] for a in added]
        print(f"{name:<22} {mb(r['first_load_bytes']):>9} {mb(r['session_bytes']):>8} "
              f"{', '.join(mb(a) for a in added):>17} "
              f"{', '.join(f'{x:.3f}' for x in ratios):>11} "
              f"{', '.join(f'{m:.0f}' for m in r['create_ms']):>10}")
        switches.append((name, r))
    print("\nSwitching: the next turn (16 new tokens) of a conversation, ms to first token")
    print(f"{'model':<22} {'tokens':>7} {'after switch':>13} {'no switch':>10} {'re-prefill':>11}")
    for name, r in switches:
        print(f"{name:<22} {r['context']:>7} {r['after_switch']['ttft_ms']:>13.0f} "
              f"{r['no_switch']['ttft_ms']:>10.0f} {r['fill']['prefill_ms']:>11.0f}")
    print("\nsession: the program's memory-planned arenas (KV caches, activations; shared with "
          "verify's where the program has one); added: what each further session added; "
          "re-prefill: prefilling the conversation again, what a switch costs one runner "
          "shared by two conversations.")


if __name__ == "__main__":
    main()

"""The tied head kernel alone (``cpp/kernels/tied_head.h``) on Gemma 4 E2B's head, for 1-8
positions, this checkout against another revision of the header (issue 59: what ``verify(k)``
pays for the head). Asserts nothing.

Compiles ``tied_head_benchmark.cpp`` with the C++ compiler (``$CXX``, else ``c++``; -O3, as
the Release build) once against each header, then runs the two in turn ``--rounds`` times. Each
number is the least thread CPU time of a call on one thread, in ms, over all rounds: CPU time,
so the other processes of a shared machine do not count; the runtime splits the same work over
its threads.

    .venv/bin/python tools/benchmarks/tied_head_benchmark.py [--baseline-rev HEAD~1] [--rounds 3]
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import click

REPO_ROOT = Path(__file__).resolve().parents[2]
HEADER = Path("packages/react-native-executorch/cpp/kernels/tied_head.h")
SOURCE = Path(__file__).with_name("tied_head_benchmark.cpp")


def build(include_dir: Path, binary: Path) -> None:
    compiler = os.environ.get("CXX", "c++")
    subprocess.run([compiler, "-O3", "-DNDEBUG", "-std=c++17", f"-I{include_dir}", str(SOURCE),
                    "-o", str(binary), "-lpthread"], check=True)


@click.command()
@click.option("--baseline-rev", default="HEAD~1", show_default=True,
              help="The git revision whose tied_head.h is the baseline.")
@click.option("--rounds", default=3, show_default=True)
@click.option("--repeat", default=7, show_default=True, help="Calls per count per round.")
def main(baseline_rev: str, rounds: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        old = work / "baseline"
        old.mkdir()
        shown = subprocess.run(["git", "-C", str(REPO_ROOT), "show", f"{baseline_rev}:{HEADER}"],
                               capture_output=True, text=True, check=False)
        if shown.returncode != 0:
            raise click.ClickException(f"no {HEADER} at {baseline_rev}: {shown.stderr.strip()}")
        (old / HEADER.name).write_text(shown.stdout)
        binaries = {baseline_rev: work / "baseline_bench", "this checkout": work / "bench"}
        build(old, binaries[baseline_rev])
        build(REPO_ROOT / HEADER.parent, binaries["this checkout"])
        best: dict[str, dict[str, float]] = {}
        for _ in range(rounds):
            for name, binary in binaries.items():
                done = subprocess.run([str(binary), str(repeat)], capture_output=True, text=True,
                                      check=True)
                got = json.loads(done.stdout)
                best[name] = {k: min(v, best.get(name, {}).get(k, v)) for k, v in got.items()}
    print("ms of thread CPU time per call, one thread (least of all rounds):")
    print("positions | " + " | ".join(best[next(iter(best))]))
    for name, row in best.items():
        print(f"{name} | " + " | ".join(f"{ms:.1f}" for ms in row.values()))
    for name, row in best.items():
        one = row["1"]
        print(f"{name}, relative to 1 position: "
              + " | ".join(f"{ms / one:.2f}" for ms in row.values()))


if __name__ == "__main__":
    main()

"""Benchmark ``trtbench analyze nsys`` on a synthesized export with millions of kernels.

Target (issue 6): 5 million kernels analyzed in under 60 s and under 4 GiB peak RSS.

The export has the table layout of a real nsys 2024.6 export (schema 3.16.1) and models a decode
loop (see ``trtbench.profiling.traces.synth_nsys.write_decode_export``): 200 kernels per step, the first
half of the steps launched eagerly (one ``cudaLaunchKernel`` per kernel), the second half replayed
from a CUDA graph with node tracing (one ``cudaGraphLaunch`` per step). The analyzer runs as the
real CLI in a child process; wall time, CPU time and the child's peak RSS are printed, then the
figures are checked against the synthetic timing model.

Usage: .venv/bin/python scripts/bench_nsys.py [--kernels 5000000] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import csv
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trtbench.profiling.traces.synth_nsys import write_decode_export
from trtbench.units import format_bytes

KERNELS_PER_STEP = 200
TARGET_S, TARGET_GIB = 60.0, 4.0


def run_analyzer(export: Path, out: Path) -> tuple[float, float, float]:
    """Run the CLI in a child; return (wall s, child CPU s, child peak RSS GiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "trtbench.cli", "--log-level", "DEBUG"]
    cmd += ["analyze", "nsys", str(export), "--out", str(out)]
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 2**20  # ru_maxrss is KiB on Linux


def check_steps(steps_csv: Path, steps: int, graph_steps: int) -> None:
    """Compare steps.csv with the timing model of write_decode_export (exact integers)."""
    with steps_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == steps, f"{len(rows)} steps, expected {steps}"
    eager, graph = rows[0], rows[-1]
    # eager: 200 calls x 4000 ns; graph: one cudaGraphLaunch of 20000 ns
    assert int(eager["launch_overhead_ns"]) == KERNELS_PER_STEP * 4000, eager
    assert int(graph["launch_overhead_ns"]) == 20000, graph
    assert int(graph["graph_kernels"]) == KERNELS_PER_STEP, graph
    assert int(eager["gpu_busy_ns"]) == KERNELS_PER_STEP * 3000, eager
    print(
        f"check: {steps} steps ({graph_steps} graph); launch overhead per step "
        f"eager {int(eager['launch_overhead_ns']) / 1000:.1f} us, "
        f"graph {int(graph['launch_overhead_ns']) / 1000:.1f} us - as modelled"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", type=int, default=5_000_000)
    parser.add_argument(
        "--workdir", type=Path, help="where to write the export (default: temp)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the export and the CSVs"
    )
    args = parser.parse_args()
    steps = args.kernels // KERNELS_PER_STEP
    graph_steps = steps // 2
    work = Path(tempfile.mkdtemp(prefix="bench_nsys_", dir=args.workdir))
    try:
        export = work / f"decode_{args.kernels}.sqlite"
        start = time.perf_counter()
        write_decode_export(
            export,
            steps=steps,
            kernels_per_step=KERNELS_PER_STEP,
            graph_steps=graph_steps,
        )
        size = format_bytes(export.stat().st_size)
        print(
            f"synthesized {steps * KERNELS_PER_STEP:,} kernels in {steps:,} steps "
            f"({size}) in {time.perf_counter() - start:.1f} s"
        )
        wall, cpu, rss = run_analyzer(export, work / "out")
        sizes = {p.name: p.stat().st_size for p in (work / "out").glob("*.csv")}
        print(
            f"CSV sizes: {', '.join(f'{k} {format_bytes(v)}' for k, v in sorted(sizes.items()))}"
        )
        check_steps(work / "out" / "steps.csv", steps, graph_steps)
        print(
            f"analyze nsys: wall {wall:.1f} s (target < {TARGET_S:.0f} s, ratio "
            f"{wall / TARGET_S:.2f}), CPU {cpu:.1f} s, peak RSS {rss:.2f} GiB "
            f"(target < {TARGET_GIB:.0f} GiB, ratio {rss / TARGET_GIB:.2f})"
        )
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work)


if __name__ == "__main__":
    main()

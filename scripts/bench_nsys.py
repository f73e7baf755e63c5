"""Benchmark ``trtbench analyze nsys`` on a synthesized export with millions of kernels.

Target (issue 16, item 5): 5 million kernels analyzed in under 20 s wall and under 2 GiB peak RSS
on 2 cores, CSVs unchanged (the columnar writer, ``trtbench.profiling.traces.table_io``, writes
the bytes pandas ``to_csv`` wrote). Before it: 58.9 s (83 s on a loaded machine), most of it
writing the 731 MB kernel_launches.csv with pandas. The run prints wall, CPU and peak RSS against
these targets, the ratio to the 58.9 s baseline (or ``--baseline-s``), and the 1-minute load
average before and after (the machine may be shared).

Measured (2 cores shared with other test runs, 1-minute load 1.8 before, 1.9 after), 5 M
kernels, CSV: wall 18.7 s, CPU 21.5 s, peak RSS 1.71 GiB (before the ADBC loader: CPU 43.4 s,
RSS 1.93 GiB; SQLite load alone 4.9 s per million kernels, now about 1.2 s wall). CPU seconds
are the figure that carries across machine loads.

The export has the table layout of a real nsys 2024.6 export (schema 3.16.1) and models a decode
loop (see ``tests/support/synth_nsys.py``, ``write_decode_export``): 200 kernels per step, the first
half of the steps launched eagerly (one ``cudaLaunchKernel`` per kernel), the second half replayed
from a CUDA graph with node tracing (one ``cudaGraphLaunch`` per step). The analyzer runs as the
real CLI in a child process; wall time, CPU time and the child's peak RSS are printed, then the
figures are checked against the synthetic timing model.

Usage: .venv/bin/python scripts/bench_nsys.py [--kernels 5000000] [--workdir DIR] [--keep]
       [--format csv|parquet] [--baseline-s 58.9]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trtbench.core.units import format_bytes

# The export generator is a test fixture (tests/support), not part of the package; the clone's
# root goes last on the path so that ``trtbench`` stays the installed package.
sys.path.append(str(Path(__file__).resolve().parents[1]))
from tests.support.synth_nsys import write_decode_export  # noqa: E402

KERNELS_PER_STEP = 200
TARGET_S, TARGET_GIB = 20.0, 2.0
BASELINE_S = 58.9  # 5 M kernels with the pandas writer (issue 16)


def run_analyzer(export: Path, out: Path, fmt: str) -> tuple[float, float, float]:
    """Run the CLI in a child; return (wall s, child CPU s, child peak RSS GiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "trtbench.cli", "--log-level", "DEBUG"]
    cmd += ["analyze", "nsys", str(export), "--out", str(out), "--format", fmt]
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 2**20  # ru_maxrss is KiB on Linux


def check_steps(steps_file: Path, steps: int, graph_steps: int) -> None:
    """Compare steps.csv (or .parquet) with the timing model of write_decode_export (exact
    integers)."""
    if steps_file.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(steps_file).to_pylist()
    else:
        with steps_file.open() as fh:
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
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv")
    parser.add_argument(
        "--baseline-s",
        type=float,
        default=BASELINE_S,
        help="wall time of the old path for the ratio (default: 58.9 s at 5 M kernels)",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
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
        wall, cpu, rss = run_analyzer(export, work / "out", args.format)
        sizes = {p.name: p.stat().st_size for p in (work / "out").glob("*.*")}
        print(
            f"sizes: {', '.join(f'{k} {format_bytes(v)}' for k, v in sorted(sizes.items()))}"
        )
        check_steps(work / "out" / f"steps.{args.format}", steps, graph_steps)
        print(
            f"analyze nsys ({args.format}): wall {wall:.1f} s (target < {TARGET_S:.0f} s: "
            f"{'met' if wall < TARGET_S else 'NOT met'}, {wall / TARGET_S:.2f} of it), "
            f"CPU {cpu:.1f} s, peak RSS {rss:.2f} GiB (target < {TARGET_GIB:.0f} GiB: "
            f"{'met' if rss < TARGET_GIB else 'NOT met'}, {rss / TARGET_GIB:.2f} of it)"
        )
        print(
            f"speed-up vs the old path ({args.baseline_s:.1f} s): "
            f"{args.baseline_s / wall:.1f}x; {os.cpu_count()} CPUs, load average "
            f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
        )
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work)


if __name__ == "__main__":
    main()

"""Benchmark ``trtbench analyze kineto`` on synthesized PyTorch profiler traces of millions of kernels.

Targets (issue 48; 2 cores): 5 M kernels in at most 45 s with at most 1 GiB peak RSS; 1 M in at
most 10 s. Before issue 48 the trace was parsed whole (``json.load``): 1 M kernels took 31 s and
4.06 GB peak RSS, growing linearly.

The traces model a decode loop (``tests/support/synth_kineto.py``, ``write_decode_trace``, the
writer ``scripts/bench_kineto_vs_hta.py`` used): 100 kernels per ``ProfilerStep#N``, one
``cudaLaunchKernel`` per kernel with its ``ac2g`` flow pair, ten steps replaying a CUDA graph;
1 M kernels are 556 MB of JSON (24 MB gzip). For each size the script writes the trace (under
``--workdir``, removed after), then runs, each in a child process:

- ``trtbench analyze kineto TRACE --jobs J`` (the streamed reader; the CLI as users run it);
- with ``--whole-file``: the whole-file reader (``KinetoTrace(path).analyze()`` and the three
  tables written), as ``analyze kineto`` ran before issue 48 (up to ``--whole-file-max``
  kernels: it needs about 4 GB per million), and whether the CLI's tables have its bytes;
- with HTA installed (``--hta-python``, see ``scripts/bench_kineto_vs_hta.py``): HTA's
  ``TraceAnalysis`` + ``get_cuda_kernel_launch_stats``, stopped when its RSS passes
  ``--hta-limit-gib``;

printing wall time, CPU time (the child and its workers), the peak summed RSS and PSS of the
process tree (sampled every 50 ms; RSS counts pages shared by forked workers in each of them,
PSS splits them) and the largest single process's peak RSS, with the 1-minute load average
before and after (the machine may be shared: CPU seconds carry across loads).

``--parsers``: how fast each JSON parser reads the trace's events (the first ``--parser-mb`` MB):
the standard library (``json.loads`` with ``parse_float=Decimal``, what the whole-file reader
does), ijson (``items``, C backend, if installed; one event at a time, as a streaming reader
would use it) and msgspec (the streamed reader's decoder, the whole text into records), MB/s of
CPU time with the garbage collector on.

Usage: .venv/bin/python scripts/bench_kineto.py [--sizes 1000000,5000000] [--jobs 2]
       [--plain] [--whole-file] [--hta-python .venv-hta/bin/python] [--workdir /tmp]
       .venv/bin/python scripts/bench_kineto.py --parsers
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

try:
    import psutil
except ImportError:  # a test dependency (pyproject extra "test")
    sys.exit("bench_kineto.py needs psutil: .venv/bin/pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
# The trace writer is a test fixture (tests/support), not part of the package; the clone's
# root goes last on the path so that ``trtbench`` stays the installed package.
sys.path.append(str(ROOT))
from tests.support.synth_kineto import decode_trace_text, write_decode_trace  # noqa: E402

TARGET_S = {1_000_000: 10.0, 5_000_000: 45.0}
TARGET_GIB = {5_000_000: 1.0}
WHOLE_FILE = """
import sys, time
from pathlib import Path
from trtbench.profiling.traces.kineto import KinetoTrace
from trtbench.profiling.traces.schemas import (
    KERNEL_LAUNCH_SCHEMA, LAUNCH_SUMMARY_SCHEMA, STEP_SCHEMA)
from trtbench.profiling.traces.table_io import write_trace_tables
a = KinetoTrace(Path(sys.argv[1])).analyze()
write_trace_tables([("kernel_launches.csv", a.kernel_launches, KERNEL_LAUNCH_SCHEMA),
    ("launch_summary.csv", a.launch_summary, LAUNCH_SUMMARY_SCHEMA),
    ("steps.csv", a.steps, STEP_SCHEMA)], Path(sys.argv[2]), "csv")
"""
HTA = """
import sys, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_cuda_kernel_launch_stats(visualize=False)
"""


class TreeMemory:
    """Peaks of the summed RSS and PSS of a process and its descendants, and of the
    largest single RSS, sampled in a thread; ``kill_above`` bytes of RSS: kill the tree."""

    def __init__(self, pid: int, kill_above: float | None = None) -> None:
        self.rss = self.pss = self.single = 0
        self.killed = False
        self._proc, self._kill_above = psutil.Process(pid), kill_above
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self._proc, *self._proc.children(recursive=True)]
            except psutil.Error:
                break
            rss = pss = 0
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    info = proc.memory_full_info()
                    rss, pss = rss + info.rss, pss + info.pss
                    self.single = max(self.single, info.rss)
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)
            if self._kill_above is not None and rss > self._kill_above:
                self.killed = True
                for proc in procs:
                    with contextlib.suppress(psutil.Error):
                        proc.kill()
            time.sleep(0.05)

    def stop(self) -> tuple[float, float, float]:
        """Stop sampling; the peaks (tree RSS, tree PSS, largest RSS) in GiB."""
        self._stop.set()
        self._thread.join()
        return self.rss / 2**30, self.pss / 2**30, self.single / 2**30


def run_child(cmd: list[str], kill_above_gib: float | None = None) -> dict:
    """Run ``cmd``; its wall and CPU seconds (with its children), memory peaks, exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    limit = None if kill_above_gib is None else kill_above_gib * 2**30
    memory = TreeMemory(child.pid, limit)
    _, err = child.communicate()
    rss, pss, single = memory.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall": time.perf_counter() - start,
        "cpu": cpu,
        "rss": rss,
        "pss": pss,
        "single": single,
        "code": child.returncode,
        "killed": memory.killed,
        "err": err.decode(errors="replace").strip().splitlines()[-1:],
    }


def verdict(value: float, target: float | None, unit: str) -> str:
    if target is None:
        return ""
    return f" (target <= {target:g} {unit}: {'met' if value <= target else 'NOT met'})"


def report(label: str, kernels: int, got: dict, targets: bool) -> None:
    if got["killed"]:
        print(
            f"  {label}: stopped at {got['rss']:.2f} GiB RSS after {got['wall']:.1f} s"
        )
        return
    if got["code"]:
        print(
            f"  {label}: exited {got['code']} after {got['wall']:.1f} s: {got['err']}"
        )
        return
    wall_t = TARGET_S.get(kernels) if targets else None
    rss_t = TARGET_GIB.get(kernels) if targets else None
    print(
        f"  {label}: wall {got['wall']:.1f} s{verdict(got['wall'], wall_t, 's')}, CPU "
        f"{got['cpu']:.1f} s, peak RSS of the process tree {got['rss']:.2f} GiB "
        f"(PSS {got['pss']:.2f} GiB){verdict(got['pss'], rss_t, 'GiB')}, largest "
        f"process {got['single']:.2f} GiB"
    )


TABLES = ("kernel_launches.csv", "launch_summary.csv", "steps.csv")


def same_tables(streamed: Path, whole: Path) -> str:
    """``yes`` when each of :data:`TABLES` the CLI wrote under ``streamed`` (in the rank's
    folder) has the bytes of the whole-file reader's in ``whole``; else what differs."""
    differ = []
    for name in TABLES:
        found = sorted(streamed.rglob(name))
        want = whole / name
        if len(found) != 1 or not want.is_file():
            differ.append(f"{name} missing ({len(found)} streamed)")
        elif found[0].read_bytes() != want.read_bytes():
            differ.append(f"{name} differs")
    return (
        "yes (byte for byte: " + ", ".join(TABLES) + ")"
        if not differ
        else "NO: " + "; ".join(differ)
    )


def scale(args: argparse.Namespace) -> None:
    """Write each size's trace, run the readers on it, print their figures."""
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench_kineto_", dir=args.workdir))
    try:
        for kernels in (int(k) for k in args.sizes.split(",")):
            suffix = ".json" if args.plain else ".json.gz"
            trace = work / f"decode_{kernels}{suffix}"
            start = time.perf_counter()
            write_decode_trace(trace, kernels)
            print(
                f"\n{kernels:,} kernels: wrote {trace.name} "
                f"({trace.stat().st_size / 1e6:,.0f} MB) in "
                f"{time.perf_counter() - start:.0f} s; {os.cpu_count()} CPUs, load "
                f"average {os.getloadavg()[0]:.1f}"
            )
            out = work / "out"
            cli = [
                sys.executable,
                "-m",
                "trtbench.cli",
                "analyze",
                "kineto",
                str(trace),
            ]
            cli += ["--out", str(out), "--jobs", str(args.jobs)]
            report(f"trtbench --jobs {args.jobs}", kernels, run_child(cli), True)
            if args.whole_file and kernels <= args.whole_file_max:
                cmd = [
                    sys.executable,
                    "-c",
                    WHOLE_FILE,
                    str(trace),
                    str(work / "whole"),
                ]
                report("trtbench whole-file reader", kernels, run_child(cmd), False)
                print(
                    f"  tables identical to the whole-file reader's: {same_tables(out, work / 'whole')}"
                )
            if args.hta_python.exists():
                folder = work / "hta"
                folder.mkdir(exist_ok=True)
                (folder / trace.name).symlink_to(trace)
                cmd = [str(args.hta_python), "-c", HTA, str(folder)]
                report("HTA 0.5.0", kernels, run_child(cmd, args.hta_limit_gib), False)
                shutil.rmtree(folder)
            elif kernels == int(args.sizes.split(",")[0]):
                print(
                    f"  HTA: {args.hta_python} missing (scripts/bench_kineto_vs_hta.py)"
                )
            print(f"  load average after: {os.getloadavg()[0]:.1f}")
            trace.unlink()
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(work / "whole", ignore_errors=True)
    finally:
        shutil.rmtree(work)


def parsers(args: argparse.Namespace) -> None:
    """Decode the first ``--parser-mb`` MB of a trace's events with each parser."""
    from trtbench.profiling.traces.kineto_events import decode_fast

    text, size = [], 0
    for piece in decode_trace_text(args.parser_mb * 4000):
        text.append(piece)
        size += len(piece)
        if size > args.parser_mb * 1e6:
            break
    body = "".join(text)
    body = body[body.index("[") : body.rindex("}, {") + 1] + "]"
    data = body.encode()
    runs = {"json (stdlib, Decimal)": lambda: json.loads(data, parse_float=Decimal)}
    try:
        import io

        import ijson

        runs[f"ijson {ijson.__version__} ({ijson.backend})"] = lambda: sum(
            1
            for _ in ijson.items(io.BytesIO(data), "item")  # one event at a time
        )
    except ImportError:
        print("ijson: not installed (.venv/bin/pip install ijson to include it)")
    runs["msgspec (trtbench's decoder)"] = lambda: decode_fast(data)
    print(f"{len(data) / 1e6:.0f} MB of trace events; best of 3, CPU time:")
    for name, run in runs.items():
        best = min(_cpu(run) for _ in range(3))
        print(f"  {name:<32} {len(data) / best / 1e6:6.0f} MB/s ({best:.2f} s)")


def _cpu(run) -> float:
    start = time.process_time()
    result = run()
    spent = time.process_time() - start
    del result
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000,5000000", help="kernels per trace")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--plain", action="store_true", help=".json, not .json.gz")
    parser.add_argument("--whole-file", action="store_true")
    parser.add_argument(
        "--whole-file-max",
        type=int,
        default=1_000_000,
        help="largest trace the whole-file reader is run on (about 4 GB per M kernels)",
    )
    parser.add_argument(
        "--hta-python", type=Path, default=ROOT / ".venv-hta" / "bin" / "python"
    )
    parser.add_argument("--hta-limit-gib", type=float, default=8.0)
    parser.add_argument("--workdir", type=Path, help="where traces go (default: temp)")
    parser.add_argument("--parsers", action="store_true")
    parser.add_argument("--parser-mb", type=int, default=64)
    args = parser.parse_args()
    if args.parsers:
        parsers(args)
    else:
        scale(args)


if __name__ == "__main__":
    main()

"""Compare ``trtbench analyze kineto`` with Holistic Trace Analysis (HTA) launch statistics.

HTA (PyPI ``HolisticTraceAnalysis``) pulls jupyterlab, so it lives in its own virtualenv and runs
in a child process: ``python3 -m venv .venv-hta && .venv-hta/bin/pip install
HolisticTraceAnalysis==0.5.0 'pandas<3'`` (HTA 0.5.0 fails under pandas 3 on traces with more
than 32767 correlations: it writes them into an int16 column). For every trace the script matches HTA's
``get_cuda_kernel_launch_stats`` rows (correlation, cpu_duration, gpu_duration, launch_delay; us)
with the same quantities from trtbench's launch frame, prints where they are equal, explains every
difference by definition, and compares the time each tool takes (load + analysis; HTA's import
excluded).

Time and memory at millions of kernels (trtbench's streamed reader, its whole-file reader,
HTA): ``scripts/bench_kineto.py``.

Usage: .venv/bin/python scripts/bench_kineto_vs_hta.py [--hta-python .venv-hta/bin/python]
       [--kernels 100000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from trtbench.profiling.traces.kineto import KinetoTrace

ROOT = Path(__file__).resolve().parents[1]
# The trace writer is a test fixture (tests/support), not part of the package; the clone's root
# goes last on the path so that ``trtbench`` stays the installed package.
sys.path.append(str(ROOT))
from tests.support.synth_kineto import write_decode_trace  # noqa: E402

FIXTURES = (
    ROOT / "tests" / "data" / "third_party" / "hta"
)  # MIT traces kept in the repository
HTA_APIS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
)
HTA_RUNNER = """
import json, sys, time, logging
logging.disable(logging.WARNING)
start = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
imported = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
stats = analysis.get_cuda_kernel_launch_stats(visualize=False)
done = time.perf_counter()
rows = next(iter(stats.values())) if stats else None
out = [] if rows is None else rows[["correlation", "cpu_duration", "gpu_duration", "launch_delay"]]
out = [] if len(out) == 0 else out.astype(float).values.tolist()
print(json.dumps({"rows": out, "seconds": done - imported}))
"""
EXPLANATIONS = {
    "apis": "HTA takes only cudaLaunchKernel/cudaLaunchKernelExC (+ cudaMemcpyAsync/"
    "cudaMemsetAsync); trtbench counts every kernel launch API, including the driver's "
    "cuLaunchKernel/cuLaunchKernelEx (Triton/inductor kernels) and cudaGraphLaunch/"
    "cuGraphLaunch, so kernels launched through those are trtbench-only rows.",
    "memory": "HTA's table includes memcpy/memset launches; trtbench's kernel_launches.csv "
    "follows nsys cuda_kern_exec_trace (kernels only). The memory rows live in trtbench's "
    "launch frame (they count as GPU busy time) and are compared here row by row.",
    "queue": "Launch delay is the same formula, max(0, gpu start - (call start + call dur)); "
    "trtbench's queue_dur_ns follows nsys instead and is empty (not 0) when the kernel "
    "started before the call returned, so its mean is over queued kernels only.",
    "rounding": "HTA rounds fractional-us (ns resolution) traces: start up (ceil), end down "
    "(floor), dur = floor(end) - ceil(start); trtbench keeps exact ns. Durations and delays "
    "can differ by up to 2 us per row on such traces.",
    "steps": "With two or more ProfilerStep annotations HTA keeps only GPU work launched before "
    "the start of the last ProfilerStep; trtbench keeps every call (steps come from the step "
    "pattern and do not filter the kernel table).",
    "graphs": "One cudaGraphLaunch stands for all kernels of the replay: trtbench attributes them "
    "to it (call_kernels = nodes; steps.csv uses the first node for the call's launch delay); "
    "HTA has no rows for them.",
}


def run_hta(hta_python: Path, trace: Path) -> tuple[pd.DataFrame, float]:
    """HTA launch stats of ``trace`` in a child process: (rows, seconds of load + stats)."""
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(trace, folder)
        proc = subprocess.run(
            [str(hta_python), "-c", HTA_RUNNER, folder],
            capture_output=True,
            text=True,
            check=True,
        )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    columns = ["correlation", "cpu_us", "gpu_us", "delay_us"]
    return pd.DataFrame(result["rows"], columns=columns, dtype=float), result["seconds"]


def _ceil_us(ns: pd.Series) -> pd.Series:
    return -((-ns.astype("int64")) // 1000).astype(float)


def _floor_us(ns: pd.Series) -> pd.Series:
    return (ns.astype("int64") // 1000).astype(float)


def run_trtbench(trace: Path) -> tuple[pd.DataFrame, KinetoTrace, float]:
    """trtbench load + full analysis; rows with HTA's columns from the launch frame (us)."""
    start = time.perf_counter()
    kineto = KinetoTrace(trace)
    kineto.analyze()
    seconds = time.perf_counter() - start
    f = kineto.launches
    f = f[f["start_ns"].notna() & f["api_start_ns"].notna()]
    api_ts, api_end = _ceil_us(f["api_start_ns"]), _floor_us(f["api_end_ns"])
    gpu_ts, gpu_end = _ceil_us(f["start_ns"]), _floor_us(f["end_ns"])
    rows = pd.DataFrame(
        {
            "correlation": f["correlation_id"].astype(float),
            # the same rows rounded the way HTA rounds ns-resolution traces
            "cpu_us_rounded": api_end - api_ts,
            "gpu_us_rounded": gpu_end - gpu_ts,
            "delay_us_rounded": (gpu_ts - api_end).clip(lower=0),
            "api": f["s_api_name"].astype(str),
            "cpu_us": (f["api_end_ns"] - f["api_start_ns"]).astype(float) / 1000,
            "gpu_us": (f["end_ns"] - f["start_ns"]).astype(float) / 1000,
            "delay_us": (f["start_ns"] - f["api_end_ns"]).clip(lower=0).astype(float)
            / 1000,
            "api_start_ns": f["api_start_ns"].astype(float),
        }
    )
    return rows, kineto, seconds


def compare(name: str, trace: Path, hta_python: Path) -> dict:
    """Print the row comparison of one trace; return its timings."""
    hta, hta_s = run_hta(hta_python, trace)
    ours, kineto, our_s = run_trtbench(trace)
    same_apis = ours[ours["api"].isin(HTA_APIS)]
    merged = same_apis.merge(
        hta, on="correlation", how="outer", suffixes=("", "_hta"), indicator=True
    )
    both = merged[merged["_merge"] == "both"]
    diff = max(
        (both[c] - both[f"{c}_hta"]).abs().max() if len(both) else 0.0
        for c in ("cpu_us", "gpu_us", "delay_us")
    )
    exact = int(
        (
            (both["cpu_us"] == both["cpu_us_hta"])
            & (both["gpu_us"] == both["gpu_us_hta"])
            & (both["delay_us"] == both["delay_us_hta"])
        ).sum()
    )
    rounded = int(
        (
            (both["cpu_us_rounded"] == both["cpu_us_hta"])
            & (both["gpu_us_rounded"] == both["gpu_us_hta"])
            & (both["delay_us_rounded"] == both["delay_us_hta"])
        ).sum()
    )
    print(f"\n== {name}: {kineto.describe()}")
    print(
        f"HTA rows {len(hta)}; trtbench rows with HTA's APIs {len(same_apis)}; matched "
        f"{len(both)}, identical {exact}, max |difference| {diff:.3f} us; identical after "
        f"rounding trtbench's ns the way HTA does: {rounded}"
    )
    for side, label in (("left_only", "trtbench only"), ("right_only", "HTA only")):
        rows = merged[merged["_merge"] == side]
        if len(rows):
            print(f"  {label}: {len(rows)} rows with HTA's APIs")
    if len(hta):
        print(
            "  sums cpu/gpu/delay us: trtbench "
            f"{both['cpu_us'].sum():,.3f} / {both['gpu_us'].sum():,.3f} / "
            f"{both['delay_us'].sum():,.3f}; HTA {both['cpu_us_hta'].sum():,.3f} / "
            f"{both['gpu_us_hta'].sum():,.3f} / {both['delay_us_hta'].sum():,.3f}"
        )
    explain(ours, hta, kineto, merged)
    return {"trace": name, "trtbench_s": our_s, "hta_s": hta_s}


def explain(ours: pd.DataFrame, hta: pd.DataFrame, kineto: KinetoTrace, merged) -> None:
    """Print the definition behind each difference that occurs in this trace."""
    extra = ours[~ours["api"].isin(HTA_APIS)]
    if len(extra):
        counts = extra["api"].value_counts().to_dict()
        print(f"  [apis] trtbench-only rows by API: {counts} -- {EXPLANATIONS['apis']}")
    kernels = kineto.get_kernel_launches()
    if (kineto.launches["gpu_kind"].isin(["memcpy", "memset"])).any():
        print(
            f"  [memory] kernel_launches.csv has {len(kernels)} rows -- {EXPLANATIONS['memory']}"
        )
    queued = kernels["queue_dur_ns"].count()
    if queued < len(kernels):
        print(
            f"  [queue] {len(kernels) - queued} kernels started before their call returned: "
            f"launch_delay 0 in both, queue_dur_ns empty -- {EXPLANATIONS['queue']}"
        )
    fractional = (kineto.launches["api_start_ns"].dropna() % 1000 != 0).any()
    if fractional:
        print(f"  [rounding] {EXPLANATIONS['rounding']}")
    steps = kineto.ranges[
        kineto.ranges["s_name"].astype(str).str.startswith("ProfilerStep")
    ]
    if len(steps) >= 2:
        last = int(steps["start_ns"].max())
        dropped = int((merged["_merge"] == "left_only").sum())
        late = int((ours["api_start_ns"] >= last).sum())
        print(
            f"  [steps] {late} trtbench rows start in the last ProfilerStep; "
            f"{dropped} rows missing from HTA -- {EXPLANATIONS['steps']}"
        )
    if (kernels["api_kind"] == "graph_launch").any():
        print(f"  [graphs] {EXPLANATIONS['graphs']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--hta-python", type=Path, default=ROOT / ".venv-hta" / "bin" / "python"
    )
    parser.add_argument(
        "--kernels", type=int, default=100_000, help="synthetic trace size"
    )
    args = parser.parse_args()
    if not args.hta_python.exists():
        raise SystemExit(
            f"{args.hta_python} missing: create it as the module docstring says"
        )
    timings = []
    with tempfile.TemporaryDirectory() as tmp:
        traces = {
            n: FIXTURES / f"{n}.json.gz"
            for n in ("simple_add", "alexnet", "triton_example")
        }
        start = time.perf_counter()
        traces["decode_synthetic"] = write_decode_trace(
            Path(tmp) / "decode.json.gz", args.kernels
        )
        print(
            f"synthesized decode_synthetic ({args.kernels:,} kernels) in "
            f"{time.perf_counter() - start:.1f} s"
        )
        for name, path in traces.items():
            timings.append(compare(name, path, args.hta_python))
    print(
        "\n== time (load + analysis, seconds; HTA: TraceAnalysis + launch stats, no import)"
    )
    for t in timings:
        print(
            f"  {t['trace']:<18} trtbench {t['trtbench_s']:7.2f}   HTA {t['hta_s']:7.2f}   "
            f"trtbench/HTA {t['trtbench_s'] / t['hta_s']:.2f}"
        )


if __name__ == "__main__":
    main()

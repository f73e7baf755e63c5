"""Write Kineto-shaped (PyTorch profiler) traces for tests and benchmarks.

:func:`event`, :func:`kernel` and :func:`write_trace` build small traces event by event
(:func:`graph_trace`: runtime, driver and flow-linked launches, then a CUDA graph replay).

:func:`write_decode_trace` writes the text ``json.dump`` writes for the trace object of
:func:`decode_trace_text` (the same bytes: ``", "`` and ``": "`` separators, floats as their
``repr``), a step at a time, so a trace of millions of kernels is written in bounded memory and
about 20 times faster than ``json.dump``; ``.gz`` paths are gzip-compressed (level 1).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

BASE_TIME_NS = 1_700_000_000_000_000_000


def event(
    cat: str, name: str, ts: float, dur: float, pid: int = 10, tid: int = 10, **args
):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def kernel(name: str, ts: float, dur: float, corr: int | None, node: int | None = None):
    args = {"device": 0, "stream": 7, "grid": [4, 1, 1], "block": [128, 1, 1]}
    args |= {"correlation": corr} if corr is not None else {}
    args |= {"graph node id": node} if node is not None else {}
    return event("kernel", name, ts, dur, pid=0, tid=7, **args)


def write_trace(path: Path, events: list[dict], **top: object) -> Path:
    with gzip.open(path, "wt") as fh:
        json.dump({"schemaVersion": 1, "traceEvents": events, **top}, fh)
    return path


def graph_trace(path: Path) -> Path:
    """Step 0: runtime + driver launch + a legacy call linked only by a flow; step 1: a graph."""
    return write_trace(
        path,
        [
            event("user_annotation", "ProfilerStep#0", 1000.0, 1000.0),
            event("user_annotation", "ProfilerStep#1", 2000.0, 1000.0),
            event("cuda_runtime", "cudaLaunchKernel", 1100.5, 10.25, correlation=1),
            kernel("gemm", 1120.125, 80.0, 1),
            event("cuda_driver", "cuLaunchKernel", 1200.0, 30.0, correlation=2),
            kernel("triton_poi", 1210.0, 40.0, 2),
            event("cuda_runtime", "cudaLaunchKernel", 1500.0, 5.0),
            {"ph": "s", "cat": "ac2g", "id": 99, "pid": 10, "tid": 10, "ts": 1500.0},
            kernel("legacy", 1510.0, 5.0, None),
            {
                "ph": "f",
                "cat": "ac2g",
                "id": 99,
                "pid": 0,
                "tid": 7,
                "ts": 1510.0,
                "bp": "e",
            },
            event("cuda_runtime", "cudaGraphLaunch", 2100.0, 50.0, correlation=3),
            kernel("gemm", 2160.0, 40.0, 3, node=7),
            kernel("softmax", 2200.0, 60.0, 3, node=8),
            kernel("gemm", 2300.0, 10.0, 3, node=9),
        ],
        baseTimeNanoseconds=1_700_000_000_000_000_000,
    )


def _step_events(i: int, steps: int, per_step: int, corr: int) -> tuple[list[str], int]:
    """The JSON text of step ``i``'s events and the last correlation id used."""
    t0 = 1000.0 + i * (per_step * 6.0 + 50.0)
    dur = per_step * 6.0 + 40.0
    out = [
        f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{i}", "pid": 1, '
        f'"tid": 1, "ts": {t0!r}, "dur": {dur!r}}}'
    ]
    graph = steps - 20 <= i < steps - 10
    for k in range(per_step):
        if not graph or k == 0:
            corr += 1
            name = "cudaGraphLaunch" if graph else "cudaLaunchKernel"
            ts = round(t0 + 1.0 + 6.0 * k + 0.123, 3)
            out.append(
                f'{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": 1, '
                f'"tid": 1, "ts": {ts!r}, "dur": 4.456, "args": {{"correlation": {corr}}}}}'
            )
            out.append(
                f'{{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": {corr}, "pid": 1, '
                f'"tid": 1, "ts": {ts!r}}}'
            )
        kts = round(t0 + 7.0 + 6.0 * k + 0.789, 3)
        node = f', "graph node id": {k + 1}' if graph else ""
        out.append(
            f'{{"ph": "X", "cat": "kernel", "name": "kernel_{k % 20}", "pid": 0, "tid": 7, '
            f'"ts": {kts!r}, "dur": 3.0, "args": {{"correlation": {corr}, "device": 0, '
            f'"stream": 7, "grid": [8, 1, 1], "block": [128, 1, 1]{node}}}}}'
        )
        out.append(
            f'{{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": {corr}, "pid": 0, '
            f'"tid": 7, "ts": {kts!r}, "bp": "e"}}'
        )
    return out, corr


def decode_trace_text(kernels: int, per_step: int = 100) -> Iterator[str]:
    """The trace's JSON text in pieces: ``kernels // per_step`` steps ``ProfilerStep#i``
    (``user_annotation``, pid 1, tid 1), each launching ``per_step`` kernels
    (``kernel_<k % 20>``, device 0, stream 7), ``ts`` in us relative to
    ``baseTimeNanoseconds``.

    Timing (us), step i starts at ``t0 = 1000 + i * (6 * per_step + 50)`` and lasts
    ``6 * per_step + 40``: eager steps launch kernel k with ``cudaLaunchKernel`` at
    ``t0 + 1.123 + 6k`` (4.456 long) and run it at ``t0 + 7.789 + 6k`` (3.0 long), each call and
    kernel tied by ``args.correlation`` and an ``ac2g`` flow (``s`` at the call, ``f`` at the
    kernel); steps ``steps - 20 .. steps - 11`` replay a CUDA graph: one ``cudaGraphLaunch`` at
    ``t0 + 1.123`` whose correlation id every node kernel carries (``graph node id`` k + 1).
    """
    yield f'{{"schemaVersion": 1, "baseTimeNanoseconds": {BASE_TIME_NS}, "traceEvents": ['
    steps, corr, first = kernels // per_step, 0, True
    for i in range(steps):
        events, corr = _step_events(i, steps, per_step, corr)
        yield ("" if first else ", ") + ", ".join(events)
        first = False
    yield "]}"


def write_decode_trace(path: Path, kernels: int, per_step: int = 100) -> Path:
    """Write :func:`decode_trace_text` to ``path`` (gzip level 1 when it ends in ``.gz``)."""
    if str(path).endswith(".gz"):
        fh = gzip.open(path, "wt", compresslevel=1)  # noqa: SIM115 (closed below)
    else:
        fh = open(path, "w")  # noqa: SIM115 (closed below)
    with fh:
        for piece in decode_trace_text(kernels, per_step):
            fh.write(piece)
    return path

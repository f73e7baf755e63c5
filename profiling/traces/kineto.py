"""PyTorch profiler (Kineto) Chrome-trace JSON: the :class:`KinetoTrace` facade.

Facts used (pytorch/kineto ``libkineto/src/output_json.cpp``; Holistic Trace Analysis
``hta/common/trace.py``): ``ts``/``dur`` are microseconds, integers in older traces (absolute
epoch) and 3-decimal floats in newer ones (relative to ``baseTimeNanoseconds``); host calls are
complete events of category ``cuda_runtime`` or ``cuda_driver`` (``cuLaunchKernel`` of
Triton/inductor kernels), GPU work is ``kernel``/``gpu_memcpy``/``gpu_memset`` (legacy
``Kernel``/``Memcpy``/``Memset``/``Runtime``); both carry ``args.correlation`` (the CUPTI id), and
flow events (``ac2g``, legacy ``async_gpu``) with ``id`` = correlation bind the call (``s``) to its
GPU event (``f``), used when ``args.correlation`` is missing. Graph-replayed kernels carry the
correlation of their ``cudaGraphLaunch`` and ``args["graph node id"]``.

Timestamps become integer ns on the trace's own timeline (``ts`` x 1000), exactly: JSON numbers
with a fraction are parsed as :class:`decimal.Decimal` (the ``parse_float`` hook of
:func:`json.load`, C-implemented, as fast as ``float``) and multiplied by 1000 in decimal,
because an epoch-microsecond value such as ``1733212345678901.234`` has no exact binary double
(their spacing near 1.7e15 is 0.25 us, so a float is off by up to 125 ns). Digits past the third
decimal (sub-ns) are rounded half to even (exact up to 25 significant digits, the default decimal
context's 28 less three). The epoch of ``ts = 0`` is :attr:`KinetoTrace.base_time_ns` (0 when
``ts`` is already epoch-based).
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from trtbench.core.errors import ConfigError, TraceParseError
from trtbench.profiling.traces.launches import (
    LaunchAnalysis,
    LaunchTraceFacade,
    classify_api,
    make_launch_frame,
    make_range_frame,
)
from trtbench.profiling.traces.schemas import RANGE_COLUMNS

logger = logging.getLogger(__name__)

API_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver"})
GPU_CATS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
}
FLOW_CATS = frozenset({"ac2g", "async_gpu"})
LEGACY_STEP = re.compile(r"^ProfilerStep#\d+$")
_GZIP_MAGIC = b"\x1f\x8b"


def check_trace_file(path: Path) -> bytes:
    """The first two bytes of ``path`` (the gzip magic tells a compressed trace).

    Raises:
        ConfigError: the file does not exist.
        TraceParseError: it is empty.
    """
    if not path.is_file():
        raise ConfigError(
            f"Kineto trace {path} does not exist; pass a .json or .json.gz trace"
        )
    with path.open("rb") as fh:
        head = fh.read(2)
    if not head:
        raise TraceParseError(
            f"{path} is empty (0 bytes); record the trace again with torch.profiler "
            "(on_trace_ready=tensorboard_trace_handler or prof.export_chrome_trace)"
        )
    return head


def not_json_error(path: Path, exc: object) -> TraceParseError:
    """The error for a trace that is truncated, not JSON, unreadable or not UTF-8."""
    return TraceParseError(
        f"{path} is truncated or not JSON ({exc}); pass a complete PyTorch profiler "
        "trace (.json or .json.gz)"
    )


def no_events_error(path: Path) -> TraceParseError:
    """The error for JSON without a top-level ``traceEvents`` list."""
    return TraceParseError(
        f"{path} is not a PyTorch profiler (Kineto) trace: it has no traceEvents list; "
        "export one with prof.export_chrome_trace(PATH)"
    )


def no_activity_error(path: Path) -> TraceParseError:
    """The error for a trace without GPU events and launch calls."""
    return TraceParseError(
        f"{path} holds no CUDA activity (no kernel, memcpy or memset events and no "
        "launch calls); profile with activities=[ProfilerActivity.CPU, "
        "ProfilerActivity.CUDA] on a GPU"
    )


def _read_json(path: Path) -> dict[str, Any]:
    """Parse ``path`` (plain or gzip JSON, whatever the suffix) into the top-level object."""
    head = check_trace_file(path)
    opener = gzip.open if head == _GZIP_MAGIC else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh, parse_float=Decimal)
    except (
        OSError,
        EOFError,
        zlib.error,
        UnicodeDecodeError,
        json.JSONDecodeError,
    ) as exc:
        raise not_json_error(path, exc) from exc
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise no_events_error(path)
    return data


NS_PER_US = Decimal(1000)


def ns_from_us(us: Any) -> int | None:
    """Microseconds -> integer ns: exact for an int or a JSON decimal (rounded half to even
    past the third decimal); a binary float (a trace built in Python) is rounded to the nearest
    ns. None for anything else or a non-finite number."""
    kind = type(us)
    if kind is Decimal:  # from parse_float: always finite (NaN/Infinity come as floats)
        return round(us * NS_PER_US)
    if kind is int:
        return us * 1000
    if isinstance(us, bool) or not isinstance(us, (int, float)):
        return None
    if isinstance(us, int):
        return int(us) * 1000
    return round(us * 1000) if us == us and abs(us) != float("inf") else None


def int_or_none(value: Any) -> int | None:
    """An int as is, a string of decimal digits (optionally ``-``) as its int; None for
    anything else (booleans, floats, other strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def xyz_or_none(value: Any) -> tuple[int | None, int | None, int | None]:
    """A 3-element list (``grid``, ``block``) as three :func:`int_or_none`; else Nones."""
    if isinstance(value, list) and len(value) == 3:
        return tuple(int_or_none(v) for v in value)  # type: ignore[return-value]
    return (None, None, None)


_API_KEYS = ("corr", "pid", "tid", "s_api_name", "api_start_ns", "api_end_ns")
_GPU_KEYS = (
    "corr",
    "gpu_kind",
    "start_ns",
    "end_ns",
    "device_id",
    "stream_id",
    "graph_node_id",
    "s_name",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)


class _Collector:
    """One pass over ``traceEvents`` into column lists (API calls, GPU activities, ranges)."""

    def __init__(self) -> None:
        self.api: dict[str, list] = {k: [] for k in _API_KEYS}
        self.gpu: dict[str, list] = {k: [] for k in _GPU_KEYS}
        self.ranges: dict[str, list] = {k: [] for k in RANGE_COLUMNS}
        self.flows: dict[tuple, Any] = {}
        self.pending: list[tuple[dict[str, list], int, tuple]] = []

    def add(self, event: dict[str, Any]) -> None:
        """Take one trace event (others than calls, GPU work, ranges and flows are ignored)."""
        ph, cat = event.get("ph"), event.get("cat")
        pid, tid, ts = event.get("pid"), event.get("tid"), event.get("ts")
        if (
            ph in ("s", "f") and cat in FLOW_CATS
        ):  # keyed by ts as written: no conversion
            self.flows[(ph, pid, tid, ts)] = event.get("id")
            return
        start, dur = ns_from_us(ts), ns_from_us(event.get("dur"))
        if ph != "X" or start is None or dur is None:
            return
        args = event.get("args") or {}
        name = str(event.get("name"))
        if cat in API_CATS:
            self._append(
                self.api,
                args.get("correlation"),
                (pid, tid, ts, "s"),
                int_or_none(pid),
                int_or_none(tid),
                name,
                start,
                start + dur,
            )
        elif cat in GPU_CATS:
            self._append(
                self.gpu,
                args.get("correlation"),
                (pid, tid, ts, "f"),
                GPU_CATS[cat],
                start,
                start + dur,
                int_or_none(args.get("device", pid)),
                int_or_none(args.get("stream", tid)),
                int_or_none(args.get("graph node id")),
                name,
                *xyz_or_none(args.get("grid")),
                *xyz_or_none(args.get("block")),
            )
        elif cat == "user_annotation" or (cat == "cpu_op" and LEGACY_STEP.match(name)):
            for column, value in zip(
                RANGE_COLUMNS,
                (name, int_or_none(pid), int_or_none(tid), start, start + dur),
                strict=True,
            ):
                self.ranges[column].append(value)

    def _append(
        self, table: dict[str, list], corr: Any, where: tuple, *values: Any
    ) -> None:
        if int_or_none(corr) is None:
            self.pending.append((table, len(table["corr"]), where))
        table["corr"].append(int_or_none(corr))
        for column, value in zip(list(table)[1:], values, strict=True):
            table[column].append(value)

    def resolve_flows(self) -> None:
        """Fill missing correlation ids from the flow (``s`` at the call, ``f`` at the GPU
        event) that starts or ends at the event's pid, tid and ts."""
        for table, row, (pid, tid, ts, ph) in self.pending:
            table["corr"][row] = int_or_none(self.flows.get((ph, pid, tid, ts)))


def _int64_frame(columns: dict[str, list], text: tuple[str, ...]) -> pd.DataFrame:
    """Columns as ``Int64`` (exact for epoch ns), except the ``text`` ones (object)."""
    return pd.DataFrame(
        {
            k: pd.Series(v, dtype=object) if k in text else pd.array(v, dtype="Int64")
            for k, v in columns.items()
        }
    )


def _launch_frame(collector: _Collector) -> pd.DataFrame:
    """GPU activities left-joined with their calls on the correlation id, plus the launch calls
    without GPU activity (the launch frame)."""
    api = _int64_frame(collector.api, ("s_api_name",))
    kinds = api["s_api_name"].map(
        {n: classify_api(n) for n in api["s_api_name"].unique()}
    )
    keyed = api[api["corr"].notna()]
    duplicated = keyed["corr"].duplicated()
    if duplicated.any():
        logger.warning(
            "%d API calls share a correlation id; kept the first", duplicated.sum()
        )
    gpu = _int64_frame(collector.gpu, ("gpu_kind", "s_name"))
    joined = gpu.merge(keyed[~duplicated], on="corr", how="left")
    idle = api[(kinds != "other") & ~api["corr"].isin(gpu["corr"].dropna())]
    if len(idle):
        idle = idle.reindex(columns=joined.columns).astype(joined.dtypes.to_dict())
        joined = pd.concat([joined, idle], ignore_index=True)
    columns = {c: joined[c] for c in joined.columns if c != "corr"}
    return make_launch_frame({**columns, "correlation_id": joined["corr"]})


def trace_description(path: Path, base_time_ns: int) -> str:
    """``Kineto trace <file> (<relative|absolute> timestamps)``."""
    kind = "relative to baseTimeNanoseconds" if base_time_ns else "absolute epoch"
    return f"Kineto trace {path.name} ({kind} timestamps)"


class KinetoTrace(LaunchTraceFacade):
    """One PyTorch profiler trace, parsed eagerly into a launch frame and an annotation frame.

    Attributes:
        path: the trace.
        base_time_ns: epoch ns of ``ts = 0`` (``baseTimeNanoseconds``; 0 for epoch timestamps).
        launches: launch frame (:data:`~trtbench.profiling.traces.schemas.LAUNCH_FRAME_COLUMNS`).
        ranges: ``user_annotation`` events (``record_function`` ranges, ``ProfilerStep#N``) and
            legacy ``cpu_op`` ``ProfilerStep#N`` events.

    Raises:
        ConfigError: the file does not exist.
        TraceParseError: empty, truncated, not JSON, no ``traceEvents``, or no CUDA activity
            (no kernel/memcpy/memset event and no launch call).
    """

    range_kind = "annotation"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        data = _read_json(self.path)
        self.base_time_ns = int_or_none(data.get("baseTimeNanoseconds")) or 0
        collector = _Collector()
        for event in data["traceEvents"]:
            if isinstance(event, dict):
                collector.add(event)
        collector.resolve_flows()
        self.launches = _launch_frame(collector)
        if self.launches.empty:
            raise no_activity_error(self.path)
        self.ranges = make_range_frame(collector.ranges)

    def describe(self) -> str:
        """``Kineto trace <file> (<relative|absolute> timestamps)``."""
        return trace_description(self.path, self.base_time_ns)


def analyze_kineto_trace(path: Path, step_pattern: str | None = None) -> LaunchAnalysis:
    """Load ``path`` and run every launch analyzer (``trtbench analyze kineto``).

    Raises:
        ConfigError, TraceParseError: see :class:`KinetoTrace` and
            :func:`~trtbench.profiling.traces.launches.resolve_step_windows`.
    """
    return KinetoTrace(path).analyze(step_pattern)

"""Kernel-launch analysis shared by the nsys and Kineto loaders: pure DataFrame in, DataFrame out.

Both loaders (:mod:`trtbench.profiling.traces.nsys`, :mod:`trtbench.profiling.traces.kineto`) produce the same
**launch frame** (:data:`LAUNCH_FRAME_COLUMNS`): one row per GPU activity (kernel, memcpy, memset,
or a whole CUDA graph when graphs are traced as a unit) joined on the correlation id with the host
CUDA API call that launched it, plus one row per kernel/graph launch call that produced no traced
GPU activity. A ``cudaGraphLaunch`` replayed with node tracing (``--cuda-graph-trace=node``) shares
its correlation id with every kernel of the replay, so all of them are attributed to that one call.
Ranges (NVTX ranges, Kineto annotations) come as a **range frame** (:data:`RANGE_COLUMNS`).

Launch calls: a host call whose name, without nsys's ``_vNNNN`` suffix, is a kernel launch
(``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cudaLaunchCooperativeKernel*``,
``cuLaunchKernel``, ``cuLaunchKernelEx``, ``cuLaunchCooperativeKernel*``, ``cuLaunchGrid*``, with
``_ptsz``/``_ptds`` variants) or a graph launch (``cudaGraphLaunch``, ``cuGraphLaunch``).

A decode step is a time window opened by one host thread, its owner (an NVTX/annotation range,
the interval from one graph launch to the next on that thread, or a thread's whole span). A call
belongs to a step when it starts inside the window (``start_ns <= api_start_ns < end_ns``) and
was made by any thread of the window's process: serving engines launch from more than one
thread, and Holistic Trace Analysis assigns by time too. Calls of other processes never count.
The owner thread's share is kept in the ``owner_*`` columns of ``steps.csv`` (before issue 33,
only the owner's calls counted: ``step_table(..., threads="owner")``). Windows that overlap
(nested ranges, the spans of two threads) each count the call. A GPU activity belongs to the
step of the call that launched it (the nsys ``nvtx_gpu_proj_trace`` projection rule).

**Launch overhead per step** (the one definition used in ``steps.csv``, the CLI summary and the
report): the host time spent inside launch calls that start in the step,
``launch_overhead_ns = sum(api_end_ns - api_start_ns)`` over the step's kernel-launch and
graph-launch calls, each call counted once however many kernels it launched. With CUDA graphs, one
``cudaGraphLaunch`` replaces the per-kernel calls, which is exactly the saving this measures. The
GPU side is reported next to it, not mixed in: launch-to-start latency and GPU idle time.

Formulas for ``kernel_launches.csv`` and ``launch_summary.csv`` follow NVIDIA's ``nsys stats``
reports ``cuda_kern_exec_trace`` and ``cuda_kern_exec_sum`` (Python + SQL shipped in the Nsight
Systems install, ``host-linux-x64/reports/``); ``launch_delay_ns`` is Holistic Trace Analysis's
launch delay (facebookresearch/HolisticTraceAnalysis ``hta/analyzers/cuda_kernel_analysis.py``),
extended to driver and graph launches.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from trtbench.profiling.traces.launch_steps import (
    DEFAULT_STEP_PATTERN,
    pair_key,
    step_table,
    step_windows_from_graph_launches,
    step_windows_from_ranges,
    step_windows_whole_trace,
)
from trtbench.profiling.traces.schemas import (
    API_KINDS,
    INT_COLUMNS,
    KERNEL_LAUNCH_SCHEMA,
    LAUNCH_FRAME_COLUMNS,
    LAUNCH_SUMMARY_SCHEMA,
    RANGE_COLUMNS,
    STEP_SCHEMA,
)

logger = logging.getLogger(__name__)

_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")
_KERNEL_LAUNCH = re.compile(
    r"^(cudaLaunchKernel|cudaLaunchKernelExC|cudaLaunchCooperativeKernel"
    r"|cudaLaunchCooperativeKernelMultiDevice|cuLaunchKernel|cuLaunchKernelEx"
    r"|cuLaunchCooperativeKernel|cuLaunchCooperativeKernelMultiDevice|cuLaunchGrid"
    r"|cuLaunchGridAsync)(_ptsz|_ptds)?$"
)
_GRAPH_LAUNCH = re.compile(r"^(cudaGraphLaunch|cuGraphLaunch)(_ptsz|_ptds)?$")


def strip_api_version(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel`` (nsys's API version suffix, 4+ digits)."""
    return _VERSION_SUFFIX.sub("", name)


def classify_api(name: str) -> str:
    """``"kernel_launch"``, ``"graph_launch"`` or ``"other"`` for an API name (suffix stripped)."""
    if _KERNEL_LAUNCH.match(name):
        return "kernel_launch"
    return "graph_launch" if _GRAPH_LAUNCH.match(name) else "other"


def make_launch_frame(columns: dict[str, object]) -> pd.DataFrame:
    """Build a launch frame with the documented dtypes from column arrays.

    Args:
        columns: every name in :data:`LAUNCH_FRAME_COLUMNS` except ``api_kind`` (derived from
            ``s_api_name``); integer columns may hold ``None``/NA, ``s_*`` columns strings,
            ``pd.Categorical`` or NA.

    Returns:
        The frame: integer columns ``Int64`` (ns timestamps, ids), the rest ``category``.
    """
    data = {}
    for name in LAUNCH_FRAME_COLUMNS:
        if name == "api_kind":
            continue
        values = columns[name]
        if name not in INT_COLUMNS:
            data[name] = pd.Categorical(values)
        elif isinstance(values, pd.arrays.IntegerArray):
            data[name] = values  # already Int64: no copy
        else:
            data[name] = pd.array(values, dtype="Int64")
    frame = pd.DataFrame(data, copy=False)
    api = frame["s_api_name"].cat
    kinds = [API_KINDS.index(classify_api(str(c))) for c in api.categories]
    kind_codes = np.asarray([*kinds, -1], dtype=np.int8)[api.codes.to_numpy()]
    frame["api_kind"] = pd.Categorical.from_codes(kind_codes, categories=API_KINDS)
    return frame[list(LAUNCH_FRAME_COLUMNS)]


def make_range_frame(columns: dict[str, object]) -> pd.DataFrame:
    """Build a range frame (:data:`RANGE_COLUMNS`): ``s_name`` category, the rest ``Int64``."""
    return pd.DataFrame(
        {
            name: pd.Categorical(columns[name])
            if name == "s_name"
            else pd.array(columns[name], dtype="Int64")
            for name in RANGE_COLUMNS
        }
    )


def _call_ranks(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: rows sharing its ``key`` (one per host call), and its 0-based rank among them."""
    sizes = np.bincount(codes := pd.factorize(key)[0])
    rank = np.empty(len(key), dtype=np.int64)
    first = np.repeat(np.cumsum(sizes) - sizes, sizes)  # sorted index of 1st row of key
    rank[np.argsort(codes, kind="stable")] = np.arange(len(key)) - first
    return sizes[codes], rank


def kernel_launch_trace(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel with its launching call (``nsys stats`` ``cuda_kern_exec_trace``).

    Args:
        frame: a launch frame. Kernels without a host call (no API row, e.g. launched before the
            capture started) are left out, as the inner join of ``cuda_kern_exec_trace`` does.

    Returns:
        :data:`KERNEL_LAUNCH_SCHEMA` rows sorted by API start, then kernel start. Formulas:
        ``queue_dur_ns = kernel_start - api_end`` only when ``kernel_start >= api_end`` (else NA);
        ``total_dur_ns = max(api_end, kernel_end) - api_start``; ``launch_delay_ns =
        max(0, kernel_start - api_end)`` (HTA); ``call_kernels`` = kernels sharing the call (the
        nodes of a graph replay); ``call_index`` = 0-based rank by start within the call.
    """
    mask = (frame["gpu_kind"] == "kernel") & frame["api_start_ns"].notna()
    pos = np.flatnonzero(mask.to_numpy())
    # one sort; rows of a call share api_start, so they end up ordered by kernel start
    order = np.lexsort(
        (
            frame["start_ns"].to_numpy(np.int64, na_value=0)[pos],
            frame["api_start_ns"].to_numpy(np.int64, na_value=0)[pos],
        )
    )
    rows = pos[order]  # when every row, in order: the frame itself, no copy
    k = frame if np.array_equal(rows, np.arange(len(frame))) else frame.iloc[rows]
    k = k.reset_index(drop=True)
    api_start, api_end = k["api_start_ns"], k["api_end_ns"]
    start, end = k["start_ns"], k["end_ns"]
    queued = start >= api_end
    call_kernels, call_index = _call_ranks(pair_key(k["pid"], k["correlation_id"]))
    out = {
        "api_start_ns": api_start,
        "api_dur_ns": api_end - api_start,
        "queue_start_ns": api_end.where(queued),
        "queue_dur_ns": (start - api_end).where(queued),
        "kernel_start_ns": start,
        "kernel_dur_ns": end - start,
        "total_dur_ns": np.maximum(api_end, end) - api_start,
        "launch_delay_ns": (start - api_end).clip(lower=0),
        "call_kernels": pd.array(call_kernels, dtype="Int64"),
        "call_index": pd.array(call_index, dtype="Int64"),
        "s_kernel_name": k["s_name"],
    }
    return pd.DataFrame(
        {
            c.name: out[c.name] if c.name in out else k[c.name]
            for c in KERNEL_LAUNCH_SCHEMA
        },
        copy=False,
    )


def _std_nsys(values: pd.core.groupby.SeriesGroupBy) -> pd.Series:
    """Sample standard deviation (ddof=1) as ``nsys stats`` prints it, 0 for a single value."""
    std = values.std(ddof=1)
    return std.where(values.count() != 1, 0.0)


SUMMARY_KEYS = ("pid", "tid", "device_id", "s_api_name", "s_kernel_name")


def kernel_launch_summary(trace: pd.DataFrame) -> pd.DataFrame:
    """Per (pid, tid, device, API, kernel) statistics (``nsys stats`` ``cuda_kern_exec_sum``).

    Args:
        trace: :func:`kernel_launch_trace` output.

    Returns:
        :data:`LAUNCH_SUMMARY_SCHEMA` rows sorted by ``total_mean_ns`` descending. ``count`` =
        kernels; ``queue_count`` = kernels with a queue time; queue statistics only over those.
        Median of an even count is the mean of the two middle values; std is the sample standard
        deviation (ddof=1; 0 for one value), matching ``nsys stats`` output (e.g. two calls
        2,971,823 and 333,015,608 ns print StdDev 233,376,198.5 = |a-b|/sqrt(2)).
    """
    groups = trace.groupby(list(SUMMARY_KEYS), observed=True, dropna=False, sort=False)
    out = summary_statistics(groups)
    out = out.reset_index().sort_values("total_mean_ns", ascending=False, kind="stable")
    return out.reset_index(drop=True)[[c.name for c in LAUNCH_SUMMARY_SCHEMA]]


def summary_statistics(
    groups: pd.core.groupby.DataFrameGroupBy,
) -> pd.DataFrame:
    """The statistics columns of :func:`kernel_launch_summary` (count, queue_count, then mean,
    median, min, max, std of each metric), one row per group of ``groups`` (a grouping of
    kernel-trace rows, by any key), indexed like ``groups``."""
    out = groups.size().rename("count").to_frame()
    out["queue_count"] = groups["queue_dur_ns"].count()
    for metric, column in (
        ("total", "total_dur_ns"),
        ("api", "api_dur_ns"),
        ("queue", "queue_dur_ns"),
        ("kernel", "kernel_dur_ns"),
    ):
        values = groups[column]
        out[f"{metric}_mean_ns"] = values.mean().astype("Float64")
        out[f"{metric}_median_ns"] = values.median().astype("Float64")
        out[f"{metric}_min_ns"] = values.min()
        out[f"{metric}_max_ns"] = values.max()
        out[f"{metric}_std_ns"] = _std_nsys(values).astype("Float64")
    return out


def any_range_matches(ranges: pd.DataFrame, pattern: str) -> bool:
    """Whether any range name matches the regular expression ``pattern`` (searched)."""
    return bool(ranges["s_name"].astype(str).str.contains(pattern, regex=True).any())


def resolve_step_windows(
    frame: pd.DataFrame, ranges: pd.DataFrame, step_pattern: str | None, *, what: str
) -> tuple[pd.DataFrame, str]:
    """Choose the decode-step windows.

    Order: ``step_pattern`` given -> ranges whose name matches it (an error when none does);
    otherwise ranges matching :data:`DEFAULT_STEP_PATTERN` (``decode_step#N`` / ``ProfilerStep#N``)
    if any; otherwise graph-launch boundaries if the trace has graph launches; otherwise one
    window per process spanning all its calls.

    Args:
        frame: launch frame.
        ranges: range frame.
        step_pattern: a Python regular expression searched in range names, or None.
        what: how the ranges are called in messages (``"NVTX range"``, ``"annotation"``).

    Returns:
        ``(windows, source)`` with ``source`` describing the choice for the summary line.

    Raises:
        ConfigError: the pattern is not a regular expression, or matches no range name.
    """
    if step_pattern is None and any_range_matches(ranges, DEFAULT_STEP_PATTERN):
        step_pattern = DEFAULT_STEP_PATTERN
    if step_pattern is not None:
        windows = step_windows_from_ranges(ranges, step_pattern, what=what)
        return windows, f"{what}s matching '{step_pattern}'"
    if (frame["api_kind"] == "graph_launch").any():
        return step_windows_from_graph_launches(frame), "graph-launch boundaries"
    logger.info(
        "no step ranges and no graph launches: one step spans each process's calls"
    )
    source = "whole trace (no step ranges, no graph launches)"
    return step_windows_whole_trace(frame), source


@dataclass(frozen=True)
class StepSummary:
    """Per-step means for the one-paragraph summary (ns; ``steps`` = number of steps)."""

    steps: int
    step_source: str
    launch_overhead_mean_ns: float
    launch_overhead_median_ns: float
    launch_calls_mean: float
    graph_launches_total: int
    kernels_mean: float
    launch_delay_mean_ns: float
    gpu_idle_mean_ns: float
    wall_mean_ns: float


def summarize_steps(steps: pd.DataFrame, step_source: str) -> StepSummary:
    """Means over :data:`STEP_SCHEMA` rows (launch overhead as defined in the module docstring).

    ``launch_delay_mean_ns`` weights each step's mean by its calls with GPU work (= the mean over
    all such calls). Empty ``steps`` give NaN means and 0 counts.
    """

    def stat(column: str, how: str = "mean") -> float:
        if not len(steps):
            return float("nan")
        return float(steps[column].astype("Float64").astype(float).agg(how))  # NA → NaN

    delays = steps["launch_delay_mean_ns"].astype("Float64")
    weights = steps["launch_delay_calls"].astype("Float64")
    total_w = float(weights[delays.notna()].sum())
    return StepSummary(
        steps=len(steps),
        step_source=step_source,
        launch_overhead_mean_ns=stat("launch_overhead_ns"),
        launch_overhead_median_ns=stat("launch_overhead_ns", "median"),
        launch_calls_mean=stat("launch_calls"),
        graph_launches_total=int(steps["graph_launches"].sum()),
        kernels_mean=stat("kernels"),
        launch_delay_mean_ns=float((delays * weights).sum() / total_w)
        if total_w
        else float("nan"),
        gpu_idle_mean_ns=stat("gpu_idle_ns"),
        wall_mean_ns=stat("wall_ns"),
    )


@dataclass(frozen=True)
class LaunchAnalysis:
    """The three tables of a trace analysis plus the summary; CSV names in :meth:`tables`."""

    kernel_launches: pd.DataFrame
    launch_summary: pd.DataFrame
    steps: pd.DataFrame
    summary: StepSummary
    # the trace, e.g. "nsys 2024.6.2.225 export (schema 3.16.1) x.sqlite"
    source: str = ""

    def tables(self) -> list[tuple[str, pd.DataFrame, tuple]]:
        """``[(csv file name, frame, schema)]`` for ``trtbench.core.export.write_csv``."""
        return [
            ("kernel_launches.csv", self.kernel_launches, KERNEL_LAUNCH_SCHEMA),
            ("launch_summary.csv", self.launch_summary, LAUNCH_SUMMARY_SCHEMA),
            ("steps.csv", self.steps, STEP_SCHEMA),
        ]


def analyze_launches(
    frame: pd.DataFrame,
    ranges: pd.DataFrame,
    step_pattern: str | None = None,
    *,
    what: str = "range",
) -> LaunchAnalysis:
    """Run every analyzer: kernel trace, per-kernel summary, steps (see :func:`resolve_step_windows`).

    Raises:
        ConfigError: from :func:`resolve_step_windows`.
    """
    started = time.perf_counter()
    windows, source = resolve_step_windows(frame, ranges, step_pattern, what=what)
    steps = step_table(frame, windows)  # before the trace: lower peak memory
    trace = kernel_launch_trace(frame)
    analysis = LaunchAnalysis(
        kernel_launches=trace,
        launch_summary=kernel_launch_summary(trace),
        steps=steps,
        summary=summarize_steps(steps, source),
    )
    logger.debug(
        "analyzed %d launch-frame rows in %.2f s",
        len(frame),
        time.perf_counter() - started,
    )
    return analysis


class LaunchTraceFacade:
    """Mixin for loader facades holding ``self.launches`` (launch frame) and ``self.ranges``.

    ``range_kind`` names the ranges in messages. Every ``get_*`` method only calls an analyzer.
    """

    launches: pd.DataFrame
    ranges: pd.DataFrame
    range_kind = "range"

    def describe(self) -> str:
        """One line naming the trace (file, tool, version)."""
        return type(self).__name__

    def get_kernel_launches(self) -> pd.DataFrame:
        """:func:`kernel_launch_trace` of this trace."""
        return kernel_launch_trace(self.launches)

    def get_launch_summary(self) -> pd.DataFrame:
        """:func:`kernel_launch_summary` of this trace."""
        return kernel_launch_summary(kernel_launch_trace(self.launches))

    def get_steps(self, step_pattern: str | None = None) -> pd.DataFrame:
        """:func:`step_table` over the windows of :func:`resolve_step_windows`."""
        windows, _ = resolve_step_windows(
            self.launches, self.ranges, step_pattern, what=self.range_kind
        )
        return step_table(self.launches, windows)

    def analyze(self, step_pattern: str | None = None) -> LaunchAnalysis:
        """:func:`analyze_launches` of this trace."""
        analysis = analyze_launches(
            self.launches, self.ranges, step_pattern, what=self.range_kind
        )
        return dataclasses.replace(analysis, source=self.describe())

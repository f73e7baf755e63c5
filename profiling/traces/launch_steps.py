"""Decode-step windows and the per-step launch table (``steps.csv``); pure functions.

Definitions (step membership, launch overhead per step) are in :mod:`trtbench.profiling.traces.launches`.
A window is opened by one host thread (``pid``, ``tid``, its owner): NVTX push/pop ranges and
Kineto annotations are per-thread. The calls it holds are those of every thread of its process
that start inside it (``threads="process"``, the rule since issue 33, as Holistic Trace Analysis
assigns by time); the owner thread's share is kept in the ``owner_*`` columns, and
``threads="owner"`` gives the old per-thread table.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from trtbench.core.errors import ConfigError
from trtbench.profiling.traces.schemas import (
    API_KINDS,
    GPU_KINDS,
    STEP_SCHEMA,
    WINDOW_COLUMNS,
)

# Ranges the reference engine writes (decode_step#N) and torch.profiler's ProfilerStep#N.
DEFAULT_STEP_PATTERN = r"^(?:decode_step|ProfilerStep)#\d+$"
WHOLE_TRACE = "whole_trace"  # the one "step" of a trace without step ranges or graphs
_MAX_LISTED_NAMES = 15
_TIMES = ("api_start_ns", "api_end_ns", "start_ns", "end_ns")


def pair_key(hi: pd.Series, lo: pd.Series) -> np.ndarray:
    """``hi << 32 | lo`` as int64, -1 where either is NA: one key per host thread
    (``pid``, ``tid``) or per host call (``pid``, ``correlation_id``)."""
    high = hi.to_numpy(dtype=np.int64, na_value=-1)
    low = lo.to_numpy(dtype=np.int64, na_value=-1)
    return np.where((high < 0) | (low < 0), -1, (high << 32) | (low & 0xFFFFFFFF))


def _windows(data: dict[str, object]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            c: pd.array(data[c], dtype="Int64")
            for c in ("pid", "tid", "start_ns", "end_ns")
        }
    )
    frame.insert(0, "s_name", pd.Categorical(data["s_name"]))
    frame = frame.sort_values(["start_ns", "pid", "tid"], kind="stable")
    frame.insert(0, "step", pd.array(np.arange(len(frame)), dtype="Int64"))
    return frame.reset_index(drop=True)[list(WINDOW_COLUMNS)]


def _list_names(ranges: pd.DataFrame) -> str:
    """The names with their counts, most frequent first; every run of digits shown as ``N``
    (``decode_step#0`` … ``#2499`` are ``'decode_step#N' (2500)``)."""
    names = ranges["s_name"].astype("object").dropna().astype(str)
    counts = names.str.replace(r"\d+", "N", regex=True).value_counts(sort=True)
    shown = ", ".join(
        f"{name!r} ({n})" for name, n in counts.head(_MAX_LISTED_NAMES).items()
    )
    more = len(counts) - _MAX_LISTED_NAMES
    return shown + (f", ... ({more} more)" if more > 0 else "")


def step_windows_from_ranges(
    ranges: pd.DataFrame, pattern: str, *, what: str = "range"
) -> pd.DataFrame:
    """One window per range whose name matches ``pattern`` (``re.search``), in start order.

    Args:
        ranges: range frame (``s_name``, ``pid``, ``tid``, ``start_ns``, ``end_ns``).
        pattern: Python regular expression.
        what: the ranges' name in messages (``"NVTX range"``, ``"annotation"``).

    Returns:
        Windows: ``step`` (0..n-1), ``s_name``, ``pid``, ``tid``, ``start_ns``, ``end_ns``.

    Raises:
        ConfigError: ``pattern`` does not compile, or matches none of the names (the message
            lists the names found with their counts).
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"step pattern {pattern!r} is not a valid regular expression ({exc}); "
            "fix --step-pattern"
        ) from exc
    names = ranges["s_name"].astype("object")
    matched = names.map(lambda n: isinstance(n, str) and regex.search(n) is not None)
    chosen = ranges[matched.astype(bool)]
    if chosen.empty:
        found = (
            f"the {len(ranges)} {what}s found are named (digits as N): "
            f"{_list_names(ranges)}"
            if len(ranges)
            else f"the trace has no {what}s at all"
        )
        raise ConfigError(
            f"step pattern {pattern!r} matches no {what} name; {found}; "
            "pass --step-pattern with a regular expression matching one of them"
        )
    return _windows({c: chosen[c].astype("object") for c in WINDOW_COLUMNS[1:]})


def _launch_calls(frame: pd.DataFrame, kinds: tuple[str, ...]) -> pd.DataFrame:
    calls = frame[frame["api_kind"].isin(kinds)]
    return calls.drop_duplicates(["pid", "correlation_id"])


def step_windows_from_graph_launches(frame: pd.DataFrame) -> pd.DataFrame:
    """Windows from graph-launch boundaries, per host thread.

    Step i on a thread runs from the start of its i-th graph-launch call to the start of the
    next one; the last step ends at the latest end of any call on that thread (at least 1 ns
    after its start). Calls before the first graph launch belong to no step.
    """
    graphs = _launch_calls(frame, ("graph_launch",)).sort_values("api_start_ns")
    keys = pair_key(graphs["pid"], graphs["tid"])
    all_keys = pair_key(frame["pid"], frame["tid"])
    ends = np.empty(len(graphs), dtype=np.int64)
    starts = graphs["api_start_ns"].to_numpy(dtype=np.int64)
    for key in np.unique(keys):
        pos = np.flatnonzero(keys == key)
        last_end = frame["api_end_ns"][all_keys == key].max()
        ends[pos[:-1]] = starts[pos[1:]]
        ends[pos[-1]] = max(int(last_end), starts[pos[-1]] + 1)
    return _windows(
        {
            "s_name": ["graph_launch"] * len(graphs),
            "pid": graphs["pid"],
            "tid": graphs["tid"],
            "start_ns": starts,
            "end_ns": ends,
        }
    )


def step_windows_whole_trace(frame: pd.DataFrame) -> pd.DataFrame:
    """One window per host thread that made launch calls, from its first call start to its
    last call end (at least 1 ns after the last start)."""
    calls = _launch_calls(frame, ("kernel_launch", "graph_launch"))
    spans = calls.groupby(["pid", "tid"], observed=True).agg(
        start_ns=("api_start_ns", "min"),
        last_start=("api_start_ns", "max"),
        end_ns=("api_end_ns", "max"),
    )
    spans["end_ns"] = np.maximum(spans["end_ns"], spans["last_start"] + 1)
    spans = spans.reset_index()
    return _windows(
        {
            "s_name": [WHOLE_TRACE] * len(spans),
            **{c: spans[c] for c in ("pid", "tid", "start_ns", "end_ns")},
        }
    )


THREAD_RULES = ("process", "owner")
"""How calls join a window: ``process`` (any thread of the window's process, the default) or
``owner`` (only the window's own thread, the rule before issue 33)."""


def _assign_rows(
    frame: pd.DataFrame, windows: pd.DataFrame, *, owner_only: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (row position, step) for every row whose call starts inside a window of its
    process (``owner_only``: of its thread); a row inside nested or overlapping windows appears
    once per window. Rows without a call, a process or a thread join no window."""
    thread_keys = pair_key(frame["pid"], frame["tid"])
    row_keys = (
        thread_keys if owner_only else frame["pid"].to_numpy(np.int64, na_value=-1)
    )
    api_start = frame["api_start_ns"]
    t = api_start.to_numpy(dtype=np.int64, na_value=0)
    valid = api_start.notna().to_numpy() & (thread_keys >= 0)
    win_keys = (
        pair_key(windows["pid"], windows["tid"])
        if owner_only
        else windows["pid"].to_numpy(np.int64, na_value=-1)
    )
    rows, steps = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for key in np.unique(win_keys):
        idx = np.flatnonzero(valid & (row_keys == key))
        order = idx[np.argsort(t[idx], kind="stable")]
        sorted_t = t[order]
        w = windows[win_keys == key]
        lo = np.searchsorted(sorted_t, w["start_ns"].to_numpy(dtype=np.int64), "left")
        hi = np.searchsorted(sorted_t, w["end_ns"].to_numpy(dtype=np.int64), "left")
        counts = np.maximum(hi - lo, 0)
        block_start = np.cumsum(counts) - counts
        positions = np.arange(counts.sum()) + np.repeat(lo - block_start, counts)
        rows.append(order[positions])
        steps.append(np.repeat(w["step"].to_numpy(dtype=np.int64), counts))
    return np.concatenate(rows), np.concatenate(steps)


def _disjoint(
    step: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same per-step unions as disjoint intervals, sorted by (step, start): touching or
    overlapping intervals of a step merged into one (their union length is unchanged)."""
    if not len(step):
        return step, start, end
    order = np.lexsort((start, step))
    g, s, e = step[order], start[order], end[order]
    run_max = pd.Series(e).groupby(g).cummax().to_numpy()
    new = np.ones(len(g), dtype=bool)  # an interval opens a new block unless it touches
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > run_max[:-1])
    block = np.cumsum(new) - 1
    ends = np.zeros(int(block[-1]) + 1, dtype=np.int64)
    np.maximum.at(ends, block, run_max)
    return g[new], s[new], ends


class StepAccumulator:
    """Per-step launch and GPU figures built from launch-frame pieces (``steps.csv``).

    The figures are sums, counts, minima and maxima, so the frame may arrive in pieces
    (:meth:`add`), provided every row of one host call comes in the same piece (``each call
    once per step`` is checked within a piece). GPU busy time, a union of intervals, is kept
    per step as disjoint intervals until :meth:`close_before` says no later piece can touch the
    step; memory is then a few counters per step plus the disjoint busy intervals of open steps.

    Args:
        windows: from one of the ``step_windows_*`` functions.
        threads: ``"process"`` (a call joins a window of its process, whichever thread made it;
            the default) or ``"owner"`` (only calls of the window's own thread).

    Raises:
        ValueError: ``threads`` is not one of :data:`THREAD_RULES`.
    """

    _SUMS = (
        "launch_calls",
        "graph_launches",
        "launch_overhead_ns",
        "kernels",
        "graph_kernels",
        "owner_launch_calls",
        "owner_graph_launches",
        "owner_launch_overhead_ns",
        "owner_kernels",
        "launch_delay_calls",
        "delay_sum",
        "busy",
    )

    def __init__(self, windows: pd.DataFrame, threads: str = "process") -> None:
        if threads not in THREAD_RULES:
            raise ValueError(f"threads {threads!r} is not one of {THREAD_RULES}")
        self.windows = windows.reset_index(drop=True)
        self.owner_only = threads == "owner"
        n = self.n = len(windows)
        self._sums = {k: np.zeros(n, dtype=np.int64) for k in self._SUMS}
        self._delay_max = np.full(n, -1, dtype=np.int64)
        self._gpu_first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        self._gpu_last = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        self._threads = np.empty(0, dtype=np.int64)  # step << 32 | tid, distinct
        self._owner_tid = windows["tid"].to_numpy(np.int64, na_value=-1)
        self._open = tuple(np.empty(0, dtype=np.int64) for _ in range(3))

    def add(self, frame: pd.DataFrame) -> None:
        """Count the rows of ``frame`` (a launch frame, or a piece holding whole calls)."""
        row, step = _assign_rows(frame, self.windows, owner_only=self.owner_only)
        if not len(row):
            return

        def sub(column: str) -> pd.Series:
            """One column of the assigned rows (a brief copy)."""
            return frame[column].take(row)

        n, sums = self.n, self._sums
        api_kind = sub("api_kind").cat.codes.to_numpy()
        graph = api_kind == API_KINDS.index("graph_launch")
        launch = graph | (api_kind == API_KINDS.index("kernel_launch"))
        gpu_kind = sub("gpu_kind").cat.codes.to_numpy()
        has_gpu = gpu_kind >= 0
        kernel = gpu_kind == GPU_KINDS.index("kernel")
        tid = sub("tid").to_numpy(np.int64, na_value=-1)
        owner = tid == self._owner_tid[step]
        # each call once per step: rows sorted by (step, pid, correlation id), one per run
        pid = sub("pid").to_numpy(np.int64, na_value=-1)
        corr = sub("correlation_id").to_numpy(np.int64, na_value=-1)
        order = np.lexsort((corr, pid, step))
        opens = np.ones(len(order), dtype=bool)
        opens[1:] = (
            (np.diff(step[order]) != 0)
            | (np.diff(pid[order]) != 0)
            | (np.diff(corr[order]) != 0)
        )
        first = np.zeros(len(order), dtype=bool)
        first[order[opens]] = True
        api_start, api_end, start, end = (
            sub(c).to_numpy(dtype=np.int64, na_value=0) for c in _TIMES
        )

        def count(mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
            w = None if weights is None else weights[mask]
            return np.bincount(step[mask], weights=w, minlength=n).astype(np.int64)

        dur = api_end - api_start
        sums["launch_calls"] += count(first & launch)
        sums["graph_launches"] += count(first & graph)
        sums["launch_overhead_ns"] += count(first & launch, dur)
        sums["kernels"] += count(kernel)
        sums["graph_kernels"] += count(kernel & graph)
        sums["owner_launch_calls"] += count(first & launch & owner)
        sums["owner_graph_launches"] += count(first & graph & owner)
        sums["owner_launch_overhead_ns"] += count(first & launch & owner, dur)
        sums["owner_kernels"] += count(kernel & owner)
        launching = first & launch
        self._threads = np.union1d(
            self._threads, (step[launching] << 32) | (tid[launching] & 0xFFFFFFFF)
        )
        # whole (step, call) runs: a launch call's rows all have GPU work, or it is one row
        # without (the launch frame appends a call without GPU rows once)
        with_gpu = (launch & has_gpu)[order]
        self._add_delays(step, start, api_end, order[with_gpu], opens[with_gpu])
        g, s, e = step[has_gpu], start[has_gpu], end[has_gpu]
        np.minimum.at(self._gpu_first, g, s)
        np.maximum.at(self._gpu_last, g, e)
        self._open = _disjoint(
            *(np.concatenate(p) for p in zip(self._open, (g, s, e), strict=True))
        )

    def _add_delays(
        self,
        step: np.ndarray,
        start: np.ndarray,
        api_end: np.ndarray,
        rows: np.ndarray,
        opens: np.ndarray,
    ) -> None:
        """Per launch call with GPU work: ``max(0, first GPU start - api end)``, summed,
        counted and maximized per step. ``rows``: the rows of such calls sorted by (step,
        call); ``opens``: where a (step, call) run starts among them."""
        if not len(rows):
            return
        at_open = np.flatnonzero(opens)
        first_start = np.minimum.reduceat(start[rows], at_open)
        delay = np.maximum(first_start - api_end[rows[at_open]], 0)
        at = step[rows[at_open]]
        self._sums["launch_delay_calls"] += np.bincount(at, minlength=self.n)
        self._sums["delay_sum"] += np.bincount(
            at, weights=delay, minlength=self.n
        ).astype(np.int64)
        np.maximum.at(self._delay_max, at, delay)

    def close_before(self, t_ns: int) -> None:
        """Settle the GPU busy time of the steps ending at or before ``t_ns``: the caller
        promises that later pieces hold no call starting before ``t_ns``."""
        done = self.windows["end_ns"].to_numpy(np.int64) <= t_ns
        self._settle(done)

    def _settle(self, done: np.ndarray) -> None:
        g, s, e = self._open
        closing = done[g]
        self._sums["busy"] += np.bincount(
            g[closing], weights=e[closing] - s[closing], minlength=self.n
        ).astype(np.int64)
        self._open = (g[~closing], s[~closing], e[~closing])

    def table(self) -> pd.DataFrame:
        """:data:`STEP_SCHEMA` rows, one per window (settles every step)."""
        self._settle(np.ones(self.n, dtype=bool))
        sums, n = self._sums, self.n
        out = self.windows.drop(columns="tid").copy()
        out["wall_ns"] = out["end_ns"] - out["start_ns"]
        for name in (
            "launch_calls",
            "graph_launches",
            "launch_overhead_ns",
            "kernels",
            "graph_kernels",
            "launch_delay_calls",
            "owner_launch_calls",
            "owner_graph_launches",
            "owner_launch_overhead_ns",
            "owner_kernels",
        ):
            out[name] = sums[name]
        calls = sums["launch_delay_calls"]
        with np.errstate(invalid="ignore", divide="ignore"):
            out["launch_delay_mean_ns"] = np.where(
                calls > 0, sums["delay_sum"] / np.maximum(calls, 1), np.nan
            )
        out["launch_delay_max_ns"] = pd.arrays.IntegerArray(
            self._delay_max, self._delay_max < 0
        )
        no_gpu = self._gpu_last == np.iinfo(np.int64).min
        first = pd.arrays.IntegerArray(np.where(no_gpu, 0, self._gpu_first), no_gpu)
        last = pd.arrays.IntegerArray(np.where(no_gpu, 0, self._gpu_last), no_gpu)
        out["gpu_start_ns"], out["gpu_end_ns"] = first, last
        out["gpu_busy_ns"] = sums["busy"]
        out["gpu_idle_ns"] = (last - first) - pd.array(sums["busy"], dtype="Int64")
        out["owner_tid"] = pd.arrays.IntegerArray(self._owner_tid, self._owner_tid < 0)
        thread_steps = self._threads >> 32
        out["launch_threads"] = np.bincount(thread_steps, minlength=n).astype(np.int64)
        return out[[c.name for c in STEP_SCHEMA]]


def step_table(
    frame: pd.DataFrame, windows: pd.DataFrame, threads: str = "process"
) -> pd.DataFrame:
    """One row per window with launch and GPU figures (:data:`STEP_SCHEMA`, ``steps.csv``).

    Args:
        frame: launch frame.
        windows: from one of the ``step_windows_*`` functions.
        threads: ``"process"`` (default): a call belongs to a window when it starts inside it
            and was made by any thread of the window's process (as Holistic Trace Analysis
            assigns by time); ``"owner"``: only by the window's own thread. The ``owner_*``
            columns always hold the owner thread's share.

    Returns:
        Counts are calls (each call once per step) or kernels; ``launch_overhead_ns`` is the
        sum of the step's launch-call durations; ``launch_delay_*`` use, per launch call with
        GPU work, ``max(0, first GPU start - api end)``; GPU figures cover every GPU activity
        (kernel, memcpy, memset, whole graph) launched by any call of the step:
        ``gpu_idle_ns = (gpu_end - gpu_start) - union length`` (NA for a step without GPU
        work: a step that ran nothing on the GPU has no idle time to speak of).

    Raises:
        ValueError: ``threads`` is not one of :data:`THREAD_RULES`.
    """
    steps = StepAccumulator(windows, threads)
    steps.add(frame)
    return steps.table()

"""Decode-step windows and the per-step launch table (``steps.csv``); pure functions.

Definitions (step membership, launch overhead per step) are in :mod:`trtbench.profiling.traces.launches`.
A window belongs to one host thread (``pid``, ``tid``): NVTX push/pop ranges and Kineto
annotations are per-thread, and so are the calls they enclose.
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
    counts = ranges["s_name"].value_counts(sort=True)
    counts = counts[counts > 0]
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
            f"the {len(ranges)} {what}s found are named: {_list_names(ranges)}"
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


def _assign_rows(
    frame: pd.DataFrame, windows: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (row position, step) for every row whose call starts inside a window of its
    thread; a row inside nested windows appears once per window."""
    row_keys = pair_key(frame["pid"], frame["tid"])
    api_start = frame["api_start_ns"]
    t = api_start.to_numpy(dtype=np.int64, na_value=0)
    valid = api_start.notna().to_numpy() & (row_keys >= 0)
    win_keys = pair_key(windows["pid"], windows["tid"])
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


def _union_length(
    step: np.ndarray, start: np.ndarray, end: np.ndarray, n: int
) -> np.ndarray:
    """Per step, the length of the union of intervals [start, end) (overlaps counted once)."""
    order = np.lexsort((start, step))
    g, s, e = step[order], start[order], end[order]
    run_max = pd.Series(e).groupby(g).cummax().to_numpy()
    prev = np.empty_like(run_max)
    prev[1:] = run_max[:-1]
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    prev[first] = s[first]
    contrib = np.maximum(0, e - np.maximum(s, prev))
    return np.bincount(g, weights=contrib, minlength=n)


def _launch_delays(calls: pd.DataFrame, n: int) -> dict[str, object]:
    """Per step: count, mean and max of ``max(0, first GPU start - api end)`` over launch calls
    (``calls``: one row per GPU activity of a launch call: step, pid, corr, start, api_end)."""
    per_call = calls.groupby(["step", "pid", "corr"], sort=False).agg(
        first_start=("start", "min"), api_end=("api_end", "first")
    )
    by_step = (
        (per_call["first_start"] - per_call["api_end"])
        .clip(lower=0)
        .groupby(level="step")
    )
    return {
        "launch_delay_calls": by_step.size().reindex(range(n), fill_value=0).to_numpy(),
        "launch_delay_mean_ns": by_step.mean().reindex(range(n)).to_numpy(),
        "launch_delay_max_ns": pd.array(by_step.max().reindex(range(n)), dtype="Int64"),
    }


def _gpu_figures(step: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> dict:
    """Per step: first start, last end, busy (union length) and idle of GPU intervals."""
    gpu = pd.DataFrame({"step": step, "start": start, "end": end})
    span = (
        gpu.groupby("step")
        .agg(first=("start", "min"), last=("end", "max"))
        .reindex(range(n))
    )
    first = pd.array(span["first"], dtype="Int64")
    last = pd.array(span["last"], dtype="Int64")
    busy = _union_length(step, start, end, n).astype(np.int64)
    idle = (last - first) - pd.array(busy, dtype="Int64")  # NA: no GPU work in the step
    return {
        "gpu_start_ns": first,
        "gpu_end_ns": last,
        "gpu_busy_ns": busy,
        "gpu_idle_ns": idle,
    }


def step_table(frame: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """One row per window with launch and GPU figures (:data:`STEP_SCHEMA`, ``steps.csv``).

    Args:
        frame: launch frame.
        windows: from one of the ``step_windows_*`` functions.

    Returns:
        Counts are calls (each call once per step) or kernels; ``launch_overhead_ns`` is the
        sum of the step's launch-call durations; ``launch_delay_*`` use, per launch call with
        GPU work, ``max(0, first GPU start - api end)``; GPU figures cover every GPU activity
        (kernel, memcpy, memset, whole graph) launched by any call of the step:
        ``gpu_idle_ns = (gpu_end - gpu_start) - union length`` (NA for a step without GPU
        work: a step that ran nothing on the GPU has no idle time to speak of).
    """
    n = len(windows)
    row, step = _assign_rows(frame, windows)

    def sub(column: str) -> pd.Series:  # one column of the assigned rows: a brief copy
        return frame[column].take(row)

    api_kind = sub("api_kind").cat.codes.to_numpy()
    graph = api_kind == API_KINDS.index("graph_launch")
    launch = graph | (api_kind == API_KINDS.index("kernel_launch"))
    gpu_kind = sub("gpu_kind").cat.codes.to_numpy()
    has_gpu = gpu_kind >= 0
    kernel = gpu_kind == GPU_KINDS.index("kernel")
    call = pd.DataFrame(
        {
            "step": step,
            "pid": sub("pid").to_numpy(),
            "corr": sub("correlation_id").to_numpy(),
        }
    )
    first = ~call.duplicated().to_numpy()  # each call once per step
    api_start, api_end, start, end = (
        sub(c).to_numpy(dtype=np.int64, na_value=0) for c in _TIMES
    )

    def count(mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        w = None if weights is None else weights[mask]
        return np.bincount(step[mask], weights=w, minlength=n).astype(np.int64)

    out = windows.drop(columns="tid").copy()
    out["wall_ns"] = out["end_ns"] - out["start_ns"]
    out["launch_calls"] = count(first & launch)
    out["graph_launches"] = count(first & graph)
    out["launch_overhead_ns"] = count(first & launch, api_end - api_start)
    out["kernels"] = count(kernel)
    out["graph_kernels"] = count(kernel & graph)
    with_gpu = launch & has_gpu
    calls = call[with_gpu].assign(start=start[with_gpu], api_end=api_end[with_gpu])
    for name, values in _launch_delays(calls, n).items():
        out[name] = values
    for name, values in _gpu_figures(
        step[has_gpu], start[has_gpu], end[has_gpu], n
    ).items():
        out[name] = values
    return out[[c.name for c in STEP_SCHEMA]]

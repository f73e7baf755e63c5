"""The join of a streamed Kineto trace: GPU events to their launch calls, and launch frames.

Used by :mod:`~trtbench.profiling.traces.kineto_stream` once the calls are collected and the GPU
events parked: :class:`CallJoin` joins each GPU row on its correlation id to the first call with
that id (the whole-file reader's ``merge(how="left")`` on the calls with duplicates dropped),
parks the joined rows by call start, and finds the launch calls without GPU work (no
correlation id, or one no GPU row has: every such call, duplicates included, as the whole-file
reader appends them); :class:`LaunchFrames` builds the launch frame of a bucket of parked rows
or of idle calls with the categories the whole frame would have.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from trtbench.profiling.traces.kineto_events import GPU_COLUMNS, NA
from trtbench.profiling.traces.launches import classify_api, make_launch_frame
from trtbench.profiling.traces.schemas import API_KINDS, GPU_KINDS
from trtbench.profiling.traces.spill import SortedRuns

logger = logging.getLogger(__name__)


def masked(values: np.ndarray) -> pd.arrays.IntegerArray:
    """``int64`` values as ``Int64``, :data:`~trtbench.profiling.traces.kineto_events.NA`
    missing."""
    return pd.arrays.IntegerArray(values, values == NA)


class CallJoin:
    """GPU events joined to the launch calls on the correlation id (the first call of an id,
    as the whole-file reader's left join keeps it).

    Args:
        calls: the calls' columns (``corr``, ``pid``, ``tid``, ``name`` code, ``start``,
            ``end``; event order).
        api_names: the calls' names by code.
        gpu_corr: GPU rows (in event order) whose correlation id came from a flow -> id.
    """

    def __init__(
        self, calls: dict[str, np.ndarray], api_names: list[str], gpu_corr: dict
    ) -> None:
        self.calls = calls
        rows = sorted(gpu_corr)  # GPU rows whose correlation id came from a flow
        self.patched_rows = np.array(rows, dtype=np.int64)
        self.patched_ids = np.array([gpu_corr[r] for r in rows], dtype=np.int64)
        keyed = np.flatnonzero(calls["corr"] != NA)
        self.keys, first = np.unique(calls["corr"][keyed], return_index=True)
        self.first = keyed[first]  # the first call of each correlation id
        if len(keyed) > len(self.keys):
            logger.warning(
                "%d API calls share a correlation id; kept the first",
                len(keyed) - len(self.keys),
            )
        names = api_names
        launch = [classify_api(n) != "other" for n in names]
        self.is_launch = np.array(launch, dtype=bool)[calls["name"]]
        kinds = [API_KINDS.index(classify_api(n)) for n in names]
        self.api_kind = np.array(kinds, dtype=np.int8)
        self.per_key = np.zeros(len(self.keys), dtype=np.int64)
        self.first_gpu_row = np.full(len(self.keys), np.iinfo(np.int64).max)
        self.gpu_rows = self.kernel_rows = 0

    def _key_of(self, corr: np.ndarray) -> np.ndarray:
        """Per correlation id, its position in :attr:`keys`, or -1."""
        if not len(self.keys):
            return np.full(len(corr), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, corr), len(self.keys) - 1)
        return np.where((corr != NA) & (self.keys[pos] == corr), pos, -1)

    def park(self, batches: Iterable[dict[str, np.ndarray]], runs: SortedRuns) -> None:
        """Every GPU row (``batches``: :data:`~trtbench.profiling.traces.kineto_events.
        GPU_COLUMNS`, in event order) that has a call parked in ``runs``, each batch sorted
        by its calls' start, with ``call`` (its row) and ``call_start``."""
        starts = self.calls["start"]
        for batch in batches:
            at, n = self.gpu_rows, len(batch["corr"])
            lo, hi = np.searchsorted(self.patched_rows, [at, at + n])
            batch["corr"][self.patched_rows[lo:hi] - at] = self.patched_ids[lo:hi]
            self.gpu_rows += n
            pos = self._key_of(batch["corr"])
            keep = np.flatnonzero(pos >= 0)
            # counted per id the batch holds (a bincount over every id would allocate
            # 8 bytes per call for each batch: 40 MB at 5 M)
            ids, counts = np.unique(pos[keep], return_counts=True)
            self.per_key[ids] += counts
            np.minimum.at(self.first_gpu_row, pos[keep], keep + at)
            call = self.first[pos[keep]]
            order = np.argsort(starts[call], kind="stable")
            rows = keep[order]
            self.kernel_rows += int(np.count_nonzero(batch["kind"][rows] == 0))
            columns = {c: batch[c][rows] for c in GPU_COLUMNS}
            columns["call"] = call[order]
            columns["call_start"] = starts[call[order]]
            runs.append(pa.record_batch({k: pa.array(v) for k, v in columns.items()}))

    def idle(self) -> np.ndarray:
        """Launch calls without GPU rows (no correlation id, or one no GPU row has), in
        event order."""
        calls = self.calls
        pos = self._key_of(calls["corr"])
        without = (pos < 0) | (self.per_key[np.maximum(pos, 0)] == 0)
        return np.flatnonzero(self.is_launch & without)

    def frame_calls(self) -> np.ndarray:
        """The calls with GPU rows, in the order of their first GPU row."""
        has = np.flatnonzero(self.per_key > 0)
        return self.first[has[np.argsort(self.first_gpu_row[has], kind="stable")]]

    def calls_frame(self, rows: np.ndarray) -> pd.DataFrame:
        """The launch-frame columns the step windows read, one row per call in ``rows``."""
        calls = self.calls
        codes = self.api_kind[calls["name"][rows]]
        return pd.DataFrame(
            {
                "pid": masked(calls["pid"][rows]),
                "tid": masked(calls["tid"][rows]),
                "correlation_id": masked(calls["corr"][rows]),
                "api_kind": pd.Categorical.from_codes(codes, categories=API_KINDS),
                "api_start_ns": masked(calls["start"][rows]),
                "api_end_ns": masked(calls["end"][rows]),
            }
        )


class LaunchFrames:
    """Launch frames of parked GPU rows and of idle calls, with the whole trace's
    categories: ``s_api_name`` those of the frame's calls (``frame_calls`` and ``idle``),
    ``s_name`` every GPU event's name (as ``pd.Categorical`` of the whole frame has them)."""

    def __init__(
        self,
        calls: dict[str, np.ndarray],
        names: tuple[list[str], list[str]],
        idle: np.ndarray,
        frame_calls: np.ndarray,
    ) -> None:
        self.calls = calls
        api_names, gpu_names = names
        used = np.unique(self.calls["name"][np.concatenate([frame_calls, idle])])
        self.api_cats = sorted({api_names[i] for i in used})
        lookup = {n: i for i, n in enumerate(self.api_cats)}
        self.api_code = np.array([lookup.get(n, -1) for n in api_names] + [-1])
        self.gpu_cats = sorted(set(gpu_names))
        lookup = {n: i for i, n in enumerate(self.gpu_cats)}
        self.gpu_code = np.array([lookup[n] for n in gpu_names] + [-1])

    def frame(
        self, gpu: dict[str, np.ndarray] | None, idle: np.ndarray
    ) -> pd.DataFrame:
        """The launch frame of parked GPU rows (or of none) and then the ``idle`` calls."""
        calls, n_idle = self.calls, len(idle)
        if gpu is None:
            gpu = {c: np.empty(0, dtype=np.int64) for c in (*GPU_COLUMNS, "call")}

        def gpu_part(c: str) -> np.ndarray:
            return np.concatenate([gpu[c], np.full(n_idle, NA)])

        def call_part(c: str) -> np.ndarray:
            return np.concatenate([calls[c][gpu["call"]], calls[c][idle]])

        corr = np.concatenate([gpu["corr"], calls["corr"][idle]])
        names = np.concatenate([gpu["name"], np.full(n_idle, -1)]).astype(np.int64)
        kinds = np.concatenate([gpu["kind"], np.full(n_idle, -1)]).astype(np.int8)
        api = self.api_code[call_part("name").astype(np.int64)]
        columns = {
            "pid": masked(call_part("pid")),
            "tid": masked(call_part("tid")),
            "correlation_id": masked(corr),
            "s_api_name": pd.Categorical.from_codes(api, categories=self.api_cats),
            "api_start_ns": masked(call_part("start")),
            "api_end_ns": masked(call_part("end")),
            "gpu_kind": pd.Categorical.from_codes(kinds, categories=GPU_KINDS),
            "start_ns": masked(gpu_part("start")),
            "end_ns": masked(gpu_part("end")),
            "device_id": masked(gpu_part("device")),
            "stream_id": masked(gpu_part("stream")),
            "graph_node_id": masked(gpu_part("node")),
            "s_name": pd.Categorical.from_codes(
                self.gpu_code[names], categories=self.gpu_cats
            ),
        }
        for g in ("grid", "block"):
            columns |= {f"{g}_{a}": masked(gpu_part(f"{g}_{a}")) for a in "xyz"}
        return make_launch_frame(columns)


def idle_pieces(
    frames: LaunchFrames, idle: np.ndarray, rows: int
) -> Iterator[tuple[pd.DataFrame, None]]:
    """Idle calls in pieces of about ``rows``, a (pid, correlation id) group never split,
    event order kept within a group."""
    calls = frames.calls
    pid, corr = calls["pid"][idle], calls["corr"][idle]
    order = np.lexsort((idle, corr, pid))
    idle, pid, corr = idle[order], pid[order], corr[order]
    groups = np.flatnonzero(
        np.r_[True, (pid[1:] != pid[:-1]) | (corr[1:] != corr[:-1])]
    )
    at = 0
    while at < len(idle):
        k = np.searchsorted(groups, at + max(rows, 1))  # the first group starting there
        end = int(groups[k]) if k < len(groups) else len(idle)
        yield frames.frame(None, idle[at:end]), None
        at = end

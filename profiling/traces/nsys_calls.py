"""The launch calls of one nsys export, indexed for the streaming join and cut into buckets.

Used by :mod:`trtbench.profiling.traces.nsys_stream`: :class:`CallIndex` joins a GPU row to its
call on (process, correlation id), keeping the first call of a key as the eager join of
:mod:`trtbench.profiling.traces.nsys` does; :func:`cut_buckets` cuts the calls, in start order,
into buckets of about a given number of GPU rows; :func:`calls_frame` gives the step-window
functions the calls alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from trtbench.profiling.traces.launches import classify_api, strip_api_version
from trtbench.profiling.traces.schemas import API_KINDS

_WIDE = 1 << 40  # correlation ids below this are keys as they are


class CallIndex:
    """(process, correlation id) of the calls -> the first call row with that key.

    Keys are ``process code << 40 | correlation id`` (correlation ids are CUPTI's 32-bit
    counters; a wider one switches to codes of the distinct ids). ``keys`` is sorted;
    ``first[i]`` is the first call row of ``keys[i]``.
    """

    def __init__(self, calls: dict[str, np.ndarray]) -> None:
        corr = calls["corr"]
        self.gpids = np.unique(calls["gpid"])
        self.wide = bool(len(corr)) and bool(corr.min() < 0 or corr.max() >= _WIDE)
        self.corrs = np.unique(corr) if self.wide else None
        self.keys, self.first = np.unique(
            self._keys(calls["gpid"], corr), return_index=True
        )

    @staticmethod
    def _code(values: np.ndarray, uniques: np.ndarray) -> np.ndarray:
        if not len(uniques):
            return np.full(len(values), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(uniques, values), len(uniques) - 1)
        return np.where(uniques[pos] == values, pos, -1)

    def _keys(self, gpid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        g = self._code(gpid, self.gpids)
        if self.corrs is not None:
            c, width = self._code(corr, self.corrs), max(len(self.corrs), 1)
        else:
            c, width = np.where((corr >= 0) & (corr < _WIDE), corr, -1), _WIDE
        return np.where((g < 0) | (c < 0), -1, g * width + c)

    def lookup(self, gpid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """Per GPU row, the position of its key in :attr:`keys`, or -1 (no call)."""
        if not len(self.keys):
            return np.full(len(gpid), -1, dtype=np.int64)
        keys = self._keys(gpid, corr)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where((keys >= 0) & (self.keys[pos] == keys), pos, -1)


@dataclass(frozen=True)
class CallBuckets:
    """Calls cut into time-ordered buckets: bucket ``b`` holds the calls that start in
    ``[first_start[b], first_start[b + 1])``; per idle call (launch call without GPU rows)
    its bucket."""

    of_idle: np.ndarray
    first_start: np.ndarray

    @property
    def count(self) -> int:
        return len(self.first_start)


def cut_buckets(
    starts: np.ndarray, weights: np.ndarray, bucket_rows: int
) -> np.ndarray:
    """Cut calls, in start order, into buckets of about ``bucket_rows`` weight; returns each
    bucket's first start (sorted, ns). Bucket ``b`` holds the calls starting in
    ``[first[b], first[b + 1])``, so calls that start in the same nanosecond share one.

    In start order, the calls of one start time form a group; a group opens a new bucket when
    the weight of every call before it, integer-divided by ``bucket_rows``, differs from that
    of the group before it. Memory: about five ``int64`` arrays of the calls' length (the
    inputs are not changed).

    Args:
        starts: call start times (ns).
        weights: GPU rows per call (1 for a call without any), non-negative.
        bucket_rows: weight per bucket aimed at.
    """
    if not len(starts):
        return np.empty(0, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    running = weights[order]
    del order
    np.cumsum(running, out=running)  # weight up to and including each call
    group = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])  # first call of each start
    before = running[np.maximum(group - 1, 0)]  # weight of every call before the group
    before[0] = 0
    del running
    cut = before // max(bucket_rows, 1)
    opens = np.r_[True, cut[1:] != cut[:-1]]
    return s[group[opens]]


def calls_frame(
    calls: dict[str, np.ndarray], rows: np.ndarray, api_names: dict
) -> pd.DataFrame:
    """The columns the step-window functions read (pid, tid, correlation_id, api_kind,
    api_start_ns, api_end_ns), one row per call in ``rows`` of ``calls``
    (:func:`~trtbench.profiling.traces.nsys.read_calls` columns)."""
    ids = np.array(sorted(api_names), dtype=np.int64)
    kinds = np.array(
        [API_KINDS.index(classify_api(strip_api_version(api_names[i]))) for i in ids]
        + [-1],
        dtype=np.int8,
    )
    name = calls["nameId"][rows]
    pos = (
        np.searchsorted(ids, name) if len(ids) else np.zeros(len(name), dtype=np.int64)
    )
    known = (
        (pos < len(ids)) & (ids[np.minimum(pos, len(ids) - 1)] == name)
        if len(ids)
        else pos < 0
    )
    codes = kinds[np.where(known, pos, len(ids))]

    def ints(values: np.ndarray) -> pd.arrays.IntegerArray:
        return pd.arrays.IntegerArray(values, np.zeros(len(values), dtype=bool))

    return pd.DataFrame(
        {
            "pid": ints((calls["gpid"][rows] >> 24) & 0xFFFFFF),
            "tid": ints(calls["tid"][rows]),
            "correlation_id": ints(calls["corr"][rows]),
            "api_kind": pd.Categorical.from_codes(codes, categories=API_KINDS),
            "api_start_ns": ints(calls["start"][rows]),
            "api_end_ns": ints(calls["end"][rows]),
        }
    )

"""Event-loop lag of the load generator: how late the loop runs what is due.

A sampler coroutine sleeps ``interval_s`` (10 ms) again and again during a tier; each wake
is a sample ``lag = actual wake − intended wake``. A busy loop (parsing responses, writing
records, too many requests for one process) wakes late, and so does every response stamp
and every send. On an idle Linux loop the lag is up to about 1 ms: asyncio's epoll wait
rounds its timeout up to whole milliseconds (``selectors.EpollSelector``).

Samples go into a fixed log-spaced histogram (1 µs to 100 s, ~1.9 % wide bins), so memory
stays constant however long the tier; the maximum is kept exactly.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

import numpy as np

SAMPLE_INTERVAL_S = 0.010
_LOW_NS, _HIGH_NS, _BINS = 1_000, 100_000_000_000, 1000
_LOG_STEP = math.log(_HIGH_NS / _LOW_NS) / _BINS


@dataclass(frozen=True)
class LagStats:
    """Event-loop lag of one tier, ms: p50, p99 (bin upper edges, ≤ 1.9 % high), max."""

    p50_ms: float
    p99_ms: float
    max_ms: float
    samples: int


def worst_lag(*stats: LagStats | None) -> LagStats | None:
    """The largest p50, p99 and max of several tiers' or workers' lag stats (samples
    summed); None when none has samples. Used where passes or client processes of one
    tier are merged: the worst loop is the one that limits the measurement."""
    present = [s for s in stats if s is not None]
    if not present:
        return None
    return LagStats(
        max(s.p50_ms for s in present),
        max(s.p99_ms for s in present),
        max(s.max_ms for s in present),
        sum(s.samples for s in present),
    )


class LagHistogram:
    """Counts of lag samples in log-spaced bins; bin 0 holds everything below 1 µs."""

    def __init__(self) -> None:
        self.counts = np.zeros(_BINS + 1, dtype=np.int64)
        self.max_ns = 0

    def add(self, lag_ns: int) -> None:
        """Count one sample (ns; negative counts as 0)."""
        lag_ns = max(lag_ns, 0)
        self.max_ns = max(self.max_ns, lag_ns)
        if lag_ns < _LOW_NS:
            self.counts[0] += 1
            return
        k = 1 + int(math.log(lag_ns / _LOW_NS) / _LOG_STEP)
        self.counts[min(k, _BINS)] += 1

    def quantile_ns(self, q: float) -> float:
        """Upper edge of the bin holding the ``q``-quantile (0 < q ≤ 1), capped at max."""
        n = int(self.counts.sum())
        if n == 0:
            return float("nan")
        k = int(np.searchsorted(np.cumsum(self.counts), math.ceil(q * n)))
        edge = _LOW_NS * math.exp(k * _LOG_STEP)
        return float(min(edge, self.max_ns))

    def stats(self) -> LagStats | None:
        """p50 / p99 / max in ms, or None without samples."""
        n = int(self.counts.sum())
        if n == 0:
            return None
        p50, p99 = (self.quantile_ns(q) / 1e6 for q in (0.5, 0.99))
        return LagStats(p50, p99, self.max_ns / 1e6, n)

    def pop_stats(self) -> LagStats | None:
        """:meth:`stats`, then start over empty (one tier's samples at a time)."""
        stats = self.stats()
        self.counts[:] = 0
        self.max_ns = 0
        return stats


async def sample_loop_lag(
    histogram: LagHistogram, interval_s: float = SAMPLE_INTERVAL_S
) -> None:
    """Sample the running loop's lag into ``histogram`` until cancelled."""
    interval_ns = int(interval_s * 1e9)
    while True:
        intended = time.perf_counter_ns() + interval_ns
        await asyncio.sleep(interval_s)
        histogram.add(time.perf_counter_ns() - intended)

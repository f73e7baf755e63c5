"""How N client processes share one tier, and how their outcomes add up again (pure).

``trtbench loadtest --workers N`` runs N processes with one event loop each
(:mod:`trtbench.profiling.loadtest.driver.workers`). Worker ``k`` of ``N`` gets a
:class:`WorkerShare`; the runner asks it which slots, request indexes and send times are
its own. Every request index of the one-process run is sent by exactly one worker, so
``request_index`` stays unique per tier and maps to the same prompt
(``prompts[index % len(prompts)]``).

- Closed loop, concurrency ``c``: the global slots ``0..c-1`` are dealt round robin, so
  worker ``k`` drives slots ``k, k+N, k+2N, …`` (``c // N + (k < c % N)`` of them). Request
  ``i`` belongs to the worker that owns slot ``i mod c``; when N divides c that is plain
  striding (worker k sends ``k, k+N, k+2N, …``). Each worker therefore gets a request count
  proportional to its slots, so every slot sends about ``n / c`` requests and all workers
  finish a count-bounded tier together (an even split of the count would leave the worker
  with fewer slots running alone at the end).
- Open loop, rate ``R``: each worker sends at ``R / N`` with its own random stream (seeded
  with ``[tier seed, k]``) and the indexes ``k, k+N, …``. N independent Poisson streams of
  rate R/N superpose to one Poisson stream of rate R (the superposition theorem); with
  ``constant`` arrivals worker k starts ``k / R`` late, which gives exactly the
  one-process schedule ``i / R``. Gamma arrivals with burstiness ≠ 1 superpose to the
  same mean rate but not to a Gamma renewal process.
- Duration-bounded tiers: every worker runs the whole duration.

With ``N = 1`` every rule above is the one-process behaviour (same slots, indexes, seed).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import count

import numpy as np

from trtbench.profiling.loadtest.records.loop_lag import worst_lag
from trtbench.profiling.loadtest.records.outcome import (
    LoadResult,
    TierOutcome,
    cpu_sum,
    settle_tier,
)

NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class WorkerShare:
    """Worker ``index`` of ``count`` client processes (``0 ≤ index < count``)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(
                f"worker {self.index} of {self.count}: need 0 <= index < count"
            )

    def slots(self, concurrency: int) -> range:
        """The global closed-loop slots this worker drives: ``k, k+N, … < c``."""
        return range(self.index, concurrency, self.count)

    def closed_indexes(self, concurrency: int) -> Iterator[int]:
        """Request indexes ``i`` with ``i mod c`` in :meth:`slots`, increasing, endless."""
        mine = self.slots(concurrency)
        for base in count(0, concurrency):
            for s in mine:
                yield base + s

    def closed_requests(self, requests: int | None, concurrency: int) -> int | None:
        """How many of the tier's first ``requests`` indexes are this worker's (None: a
        duration-bounded tier)."""
        if requests is None:
            return None
        full, rest = divmod(requests, concurrency)
        mine = self.slots(concurrency)
        return full * len(mine) + sum(1 for s in mine if s < rest)

    def open_rate(self, rate_per_s: float) -> float:
        """This worker's share of the tier's rate: ``R / N`` (requests/s)."""
        return rate_per_s / self.count

    def open_index(self, j: int) -> int:
        """The request index of this worker's ``j``-th send: ``k + j·N``."""
        return self.index + j * self.count

    def open_requests(self, requests: int | None) -> int | None:
        """How many of the indexes ``0..requests-1`` are ``k + j·N`` (None: duration)."""
        if requests is None:
            return None
        return len(range(self.index, requests, self.count))

    def open_rng(self, tier_seed: int) -> np.random.Generator:
        """The arrival draws: seeded with the tier seed alone for one worker (the
        one-process stream), with ``[tier seed, k]`` for several."""
        if self.count == 1:
            return np.random.default_rng(tier_seed)
        return np.random.default_rng([tier_seed, self.index])

    def open_start_ns(self, rate_per_s: float, arrival: str) -> int:
        """Delay of this worker's first send: ``k / R`` seconds for ``constant`` arrivals
        (interleaving the workers into the schedule ``i / R``), else 0 (ns)."""
        if arrival != "constant":
            return 0
        return round(self.index / rate_per_s * NS_PER_S)


def merge_results(
    results: Sequence[LoadResult],
    stop_signal: int | None = None,
    server_failure: str | None = None,
    failed_tier: int | None = None,
) -> LoadResult:
    """One :class:`LoadResult` from the workers' results (tier passes matched by position).

    Per tier pass: ``requests``, ``failed``, ``unfinished`` and ``client_cpu_s`` are summed
    (the event-loop lag is the worst worker's), then the status
    is settled on the sums (:func:`~trtbench.profiling.loadtest.records.outcome.settle_tier`) with
    the first stop signal and server failure of any worker or of the parent: a stop
    anywhere makes the pass ``interrupted``, a dead server ``partial``/``failed``. A worker
    that was interrupted, or saw a server failure, marks the tiers it ended that way, so
    the worst status of the workers wins over ``complete``.

    Args:
        results: one per worker that returned (a crashed worker returns none).
        stop_signal: a stop signal the parent received (wins over the workers').
        server_failure: a failure the parent saw (a dead server, a crashed worker).
        failed_tier: position of the pass that was running when the parent saw
            ``server_failure`` (settled with it even if every worker called it complete);
            None: only passes some worker marked are.

    Returns:
        The merged result; its tiers are the longest run of passes any worker reached.
    """
    stop = stop_signal
    failure = server_failure
    for r in results:
        stop = stop if stop is not None else r.stop_signal
        failure = failure if failure is not None else r.server_failure
    merged = LoadResult(stop_signal=stop, server_failure=failure)
    passes = max((len(r.tiers) for r in results), default=0)
    for i in range(passes):
        parts = [(r, r.tiers[i]) for r in results if i < len(r.tiers)]
        summed = TierOutcome(
            parts[0][1].tier,
            requests=sum(t.requests for _, t in parts),
            failed=sum(t.failed for _, t in parts),
            unfinished=sum(t.unfinished for _, t in parts),
        )
        stopped = any(t.status == "interrupted" for _, t in parts)
        broken = i == failed_tier or any(
            r.server_failure is not None and t.status in ("partial", "failed")
            for r, t in parts
        )
        settled = settle_tier(
            summed, stop if stopped else None, failure if broken else None
        )
        lag = worst_lag(*(t.loop_lag for _, t in parts))
        cpu = cpu_sum(*(t.client_cpu_s for _, t in parts))
        merged.tiers.append(replace(settled, loop_lag=lag, client_cpu_s=cpu))
    return merged

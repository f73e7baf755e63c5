"""How a load test ended: each tier's status and counts (the records are in files).

A tier is a measurement only when it is ``complete``; the summary carries the status in
``tier_status`` and the report never computes a speedup from any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from trtbench.core.stop_signals import signal_name
from trtbench.profiling.loadtest.records.loop_lag import LagStats
from trtbench.profiling.loadtest.records.spec_counters import SpecCounters

TIER_COMPLETE, TIER_PARTIAL, TIER_FAILED, TIER_INTERRUPTED = (
    "complete",
    "partial",
    "failed",
    "interrupted",
)
TIER_STATUSES = (TIER_COMPLETE, TIER_PARTIAL, TIER_FAILED, TIER_INTERRUPTED)


@dataclass
class TierOutcome:
    """How one tier ended.

    Attributes:
        tier: its label.
        status: ``complete`` (ran to its end), ``partial`` (the server died or stopped
            answering after some requests succeeded), ``failed`` (no request succeeded:
            the server died first, or every request failed) or ``interrupted`` (a stop
            signal). Only a complete tier is a measurement.
        requests: requests written (finished, failed ones included).
        failed: of those, failed.
        unfinished: in flight at the stop: never measured, not written.
        reason: why it is not complete (one line; '' when complete).
        loop_lag: the client's event-loop lag during the tier (p50 / p99 / max ms;
            :mod:`~trtbench.profiling.loadtest.records.loop_lag`), None without samples.
        spec_counts: per pass, the server's speculative counters' delta over the pass
            (:mod:`~trtbench.profiling.loadtest.clients.server_counts`); None for a pass that lost a
            scrape; empty when the server exports none.
        client_cpu_s: CPU seconds (user + system, every thread) the client process spent
            sending and receiving the tier's requests and making their records, from its
            first send to its last end (summed over passes and client processes; process
            start-up, warmup and the server's counter reads not included); None when not
            measured.
    """

    tier: str
    status: str = TIER_COMPLETE
    requests: int = 0
    failed: int = 0
    unfinished: int = 0
    reason: str = ""
    loop_lag: LagStats | None = None
    spec_counts: tuple[SpecCounters | None, ...] = ()
    client_cpu_s: float | None = None

    def line(self) -> str:
        """``N requests, F failed[, U unfinished], <status>[ (<reason>)]`` (for the log)."""
        unfinished = f", {self.unfinished} unfinished" if self.unfinished else ""
        why = f" ({self.reason})" if self.reason else ""
        return (
            f"{self.requests} requests, {self.failed} failed{unfinished}, "
            f"{self.status}{why}"
        )


@dataclass
class LoadResult:
    """How every tier ended (the records themselves are in the sink's files)."""

    tiers: list[TierOutcome] = field(default_factory=list)
    stop_signal: int | None = None
    server_failure: str | None = None

    @property
    def interrupted(self) -> bool:
        return self.stop_signal is not None

    @property
    def tiers_done(self) -> list[str]:
        """Labels of the complete tiers."""
        return [t.tier for t in self.tiers if t.status == TIER_COMPLETE]

    @property
    def request_count(self) -> int:
        return sum(t.requests for t in self.tiers)


def cpu_sum(*seconds: float | None) -> float | None:
    """The sum of the measured ``client_cpu_s`` values (None when none is)."""
    present = [s for s in seconds if s is not None]
    return sum(present) if present else None


def settle_tier(
    tier: TierOutcome, stop_signal: int | None, server_failure: str | None
) -> TierOutcome:
    """The status of a tier that just ended (pure).

    A stop signal makes it ``interrupted``; a dead server ``partial`` when at least one
    request succeeded, else ``failed``; a tier where no request succeeded (all failed, or
    none finished) is ``failed``; anything else ``complete``.
    """
    ok = tier.requests - tier.failed
    if stop_signal is not None:
        return replace(
            tier,
            status=TIER_INTERRUPTED,
            reason=f"stopped by {signal_name(stop_signal)}",
        )
    if server_failure is not None:
        return replace(
            tier, status=TIER_PARTIAL if ok else TIER_FAILED, reason=server_failure
        )
    if not tier.requests:
        return replace(tier, status=TIER_FAILED, reason="no request finished")
    if not ok:
        return replace(tier, status=TIER_FAILED, reason="every request failed")
    return replace(tier, status=TIER_COMPLETE, reason="")


def result_json(result: LoadResult) -> dict[str, object]:
    """What run.json keeps of a load result: tiers done and each tier's outcome."""
    return {
        "tiers_done": result.tiers_done,
        "tiers": {
            t.tier: {
                "status": t.status,
                "reason": t.reason,
                "requests": t.requests,
                "failed": t.failed,
                "unfinished": t.unfinished,
                **(
                    {
                        "server_spec_counts": [
                            None if c is None else c.as_json() for c in t.spec_counts
                        ]
                    }
                    if t.spec_counts
                    else {}
                ),
            }
            for t in result.tiers
        },
        "interrupted": result.interrupted,
        "server_failure": result.server_failure,
    }


NOT_MEASURED = "not measured"
"""The start of a pass's reason when its cell never ran: its server had died before."""


def missed_pass(
    tier: str, round_index: int, failure: str, earlier: bool
) -> TierOutcome:
    """The outcome of a cell that did not run because its server had died (``earlier``: an
    earlier pass of the tier completed, so the tier is ``partial``, else ``failed``)."""
    return TierOutcome(
        tier,
        TIER_PARTIAL if earlier else TIER_FAILED,
        reason=f"{NOT_MEASURED} from round {round_index + 1} on: the server had died "
        f"({failure})",
    )


def failure_lines(results: Mapping[str, LoadResult]) -> list[str]:
    """One line per variant whose server died: ``variant <v>, tier <t>: <reason>`` (the
    tier that was running), or ``variant <v> (between cells)``, then the tiers it could
    not measure after: ``; not measured after it: c1, c4``."""
    lines = []
    for variant, result in results.items():
        if result.server_failure is None:
            continue
        bad = [t for t in result.tiers if t.status in (TIER_PARTIAL, TIER_FAILED)]
        missed = [t.tier for t in bad if t.reason.startswith(NOT_MEASURED)]
        ran = [t for t in bad if not t.reason.startswith(NOT_MEASURED)]
        if ran:
            where = f", tier {ran[-1].tier}"
        else:
            where = " (between cells)" if missed else " (before the first tier)"
        after = f"; not measured after it: {', '.join(missed)}" if missed else ""
        lines.append(f"variant {variant}{where}: {result.server_failure}{after}")
    return lines

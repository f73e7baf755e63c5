"""The worker side of ``--workers N``: what one spawned client process runs.

Worker ``k`` runs :func:`~trtbench.profiling.loadtest.driver.runner.run_load` on its
:class:`~trtbench.profiling.loadtest.workload.partition.WorkerShare` of every tier, writes its own
part files, lines up with its siblings and the parent before each tier pass (a barrier),
counts finished requests in shared memory and hands its :class:`LoadResult` (or its error)
to the parent over a queue. The parent side is :mod:`trtbench.profiling.loadtest.driver.workers`.
"""

from __future__ import annotations

import pickle
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from trtbench.core.errors import LoadTestError
from trtbench.core.stop_signals import STOP_SIGNALS
from trtbench.profiling.loadtest.clients.health import Health, HealthCheck
from trtbench.profiling.loadtest.clients.target import LoadSettings, LoadTarget
from trtbench.profiling.loadtest.driver.runner import run_load
from trtbench.profiling.loadtest.records.outcome import LoadResult
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink, RecordFiles
from trtbench.profiling.loadtest.workload.partition import WorkerShare
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.repeats import TierPass
from trtbench.profiling.loadtest.workload.schedule import Tier


@dataclass(frozen=True)
class WorkerJob:
    """What every worker process is given (pickled once per worker)."""

    target: LoadTarget
    prompts: Sequence[Prompt]
    tiers: Sequence[Tier]
    settings: LoadSettings
    variant: str
    tokenizer: TextTokenizer | None
    seed: int
    files: Sequence[RecordFiles]
    relay_health: bool
    passes: Sequence[TierPass] | None = None


def barrier_timeout_s(settings: LoadSettings) -> float:
    """An upper bound (s) on how long a worker may wait for its siblings at a tier barrier.

    A sibling is busy at most with the warmup (``warmup_requests`` requests in a row, each
    ending within ``request_timeout_s``) or one tier (``duration_s`` plus one request, or
    ``requests_per_tier`` requests in a row), plus a minute of slack.
    """
    per = settings.request_timeout_s
    if settings.duration_s is not None:
        tier = settings.duration_s + per
    else:
        tier = per * (settings.requests_per_tier or 1)
    return max(tier, per * settings.warmup_requests) + 60.0


class SharedCounter:
    """A worker's progress: finished requests (ok, failed) in shared memory."""

    def __init__(self, counts: Any, k: int):
        self.counts, self.k = counts, k

    def tier_started(self, variant: str, tier: Tier, total: int | None) -> None:
        pass  # the parent marks tiers

    def request_done(self, ok: bool) -> None:
        self.counts[2 * self.k + (not ok)] += 1  # one writer per cell

    def tier_ended(self) -> None:
        pass


def worker_check(dead: Any, reason: Any, url: str | None) -> HealthCheck:
    """A worker's blocking check: the parent's relayed verdict, then (``url``) gRPC ready."""
    client = None

    def check() -> Health:
        nonlocal client
        if dead.is_set():
            return Health(reason.value.decode(errors="replace"), fatal=True)
        if url is None:
            return Health()
        from tritonclient.grpc import InferenceServerClient  # noqa: PLC0415

        try:
            client = client or InferenceServerClient(url)
            ready = client.is_server_ready(client_timeout=1.0)
        except Exception as exc:  # noqa: BLE001 - any failure is a sick answer
            return Health(f"Triton at {url} does not answer ({type(exc).__name__})")
        return Health(None if ready else f"Triton at {url} is not ready")

    return check


def portable(exc: BaseException) -> BaseException:
    """``exc`` when it survives pickling (the queue to the parent), else a LoadTestError
    with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any exception that does not pickle
        return LoadTestError(f"{type(exc).__name__}: {exc}")


def worker_main(k: int, job: WorkerJob, ipc: dict[str, Any]) -> None:
    """Entry point of worker ``k`` (a spawned process)."""
    early: list[int] = []
    for sig in STOP_SIGNALS:  # until run_load installs its own
        signal.signal(sig, lambda signum, _frame: early.append(signum))
    events, barrier = ipc["events"], ipc["barrier"]
    share = WorkerShare(k, len(job.files))
    settings = job.settings if k == 0 else replace(job.settings, warmup_requests=0)
    wait_s = barrier_timeout_s(job.settings)

    def before_tier(tier: Tier) -> bool:
        events.put(("sync", k, tier.label))
        try:
            barrier.wait(wait_s)
        except threading.BrokenBarrierError:
            return False
        return True

    url = None if job.relay_health else job.target.url
    health = worker_check(ipc["dead"], ipc["reason"], url)
    try:
        if early:
            events.put(("result", k, LoadResult(stop_signal=early[0])))
            return
        with CsvRecordSink(job.files[k]) as sink:
            result = run_load(
                job.target,
                job.prompts,
                job.tiers,
                settings,
                job.variant,
                job.tokenizer,
                SharedCounter(ipc["counts"], k),
                job.seed,
                sink=sink,
                health=health,
                share=share,
                before_tier=before_tier,
                passes=job.passes,
            )
        events.put(("result", k, result))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises
        events.put(("error", k, portable(exc)))

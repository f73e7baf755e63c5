"""``--workers N``: one load test driven by N client processes, one event loop each.

A single Python process stamps every response on one event loop; past a few hundred
requests in flight the loop itself becomes the bottleneck. :func:`run_workers` starts N
processes (``multiprocessing`` with the ``spawn`` start method: gRPC's threads do not
survive ``fork``). Worker ``k`` runs :func:`~trtbench.profiling.loadtest.driver.runner.run_load`
on its :class:`~trtbench.profiling.loadtest.workload.partition.WorkerShare` of every tier and streams
its records to its own part files; the parent merges the outcomes
(:func:`~trtbench.profiling.loadtest.workload.partition.merge_results`) and the caller merges the
files.

Coordination:

- Tiers stay aligned: before each tier pass every worker reports to the parent and waits on
  a barrier of N + 1 parties; the parent marks the tier (progress, samplers, nsys capture)
  and joins last, so no worker sends the next tier's first request before all have ended
  the previous one and the tier is marked. A worker's wait times out after an upper bound
  of how long a sibling can still be busy; a dead worker or a stop breaks the barrier.
- Warmup runs in worker 0 only (the server sees the warmup requests once).
- Stop signals: the parent forwards SIGINT/SIGTERM/SIGHUP to every worker, each ends its
  tier as ``interrupted`` and writes what finished; the parent waits (with timeouts), then
  terminates what is left. A worker that exits without a result is a failure line
  (``client worker k exited with code X``) and stops the others.
- Health: with a ``health`` check (a server trtbench manages) the parent polls it (same
  rules as the one-process :class:`~trtbench.profiling.loadtest.clients.health.Watcher`) and relays
  a death to the workers through a shared event; without one each worker checks gRPC
  ``ServerReady`` itself. Either way a worker death is relayed the same way.
- Progress: each worker counts finished requests in shared memory; the parent polls the
  counts every 0.1 s and marks each tier pass on the progress (the CLI counts cells).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing as mp
import os
import shutil
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from trtbench.core.errors import LoadTestError
from trtbench.core.stop_signals import STOP_SIGNALS
from trtbench.profiling.loadtest.clients.health import HealthCheck, Watcher, threaded
from trtbench.profiling.loadtest.clients.target import (
    LoadSettings,
    LoadTarget,
    Progress,
)
from trtbench.profiling.loadtest.driver.worker_child import WorkerJob, worker_main
from trtbench.profiling.loadtest.records.outcome import LoadResult
from trtbench.profiling.loadtest.records.record_sink import RecordFiles
from trtbench.profiling.loadtest.workload.partition import merge_results
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.repeats import TierPass
from trtbench.profiling.loadtest.workload.schedule import Tier

log = logging.getLogger(__name__)

POLL_S = 0.1
SYNC_TIMEOUT_S = 60.0  # the parent joins the barrier only once every worker is there
JOIN_TIMEOUT_S = 30.0
REASON_BYTES = 512


class _Parent:
    """The parent's side: starts, lines up, watches and reaps the workers."""

    def __init__(self, job: WorkerJob, progress: Progress | None):
        n = len(job.files)
        ctx = mp.get_context("spawn")
        self.job, self.progress, self.n = job, progress, n
        self.ipc = {
            "events": ctx.Queue(),
            "barrier": ctx.Barrier(n + 1),
            "counts": ctx.RawArray("q", 2 * n),
            "dead": ctx.Event(),
            "reason": ctx.RawArray("c", REASON_BYTES),
        }
        self.procs = [
            ctx.Process(
                target=worker_main,
                args=(k, job, self.ipc),
                name=f"trtbench-loadgen-{k}",
                daemon=True,
            )
            for k in range(n)
        ]
        self.results: dict[int, LoadResult] = {}
        self.errors: dict[int, BaseException] = {}
        self.synced: set[int] = set()
        self.sync_label: str | None = None
        self.passes = 0  # tier passes started
        self.stop: int | None = None
        self.failure: str | None = None
        self.failed_tier: int | None = None
        self.seen = [0] * (2 * n)
        self.tiers = {t.label: t for t in job.tiers}

    # -- stop signals and failures ------------------------------------------------------
    def on_signal(self, signum: int, _frame: object = None) -> None:
        if self.stop is None:
            self.stop = signum
        for p in self.procs:
            if p.pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(p.pid, signum)

    def fail(self, reason: str) -> None:
        """Record a failure (dead server, dead worker) and tell every worker to stop."""
        if self.failure is None:
            self.failure = reason
            self.failed_tier = self.passes - 1 if self.passes else None
            data = reason.encode()[: REASON_BYTES - 1]
            self.ipc["reason"].value = data
            self.ipc["dead"].set()
            log.warning("%s", reason)

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {s: signal.signal(s, self.on_signal) for s in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # -- the loop -----------------------------------------------------------------------
    def finished(self) -> bool:
        return len(self.results) + len(self.errors) == self.n

    def handle(self, event: tuple) -> None:
        kind, k, value = event
        if kind == "sync":
            self.synced.add(k)
            self.sync_label = value
        elif kind == "result":
            self.results[k] = value
        else:
            self.errors[k] = value
            if self.stop is None:
                self.fail(f"client worker {k} failed: {value}")

    def drain(self, timeout: float) -> None:
        queue = self.ipc["events"]
        try:
            self.handle(queue.get(timeout=timeout))
            while True:
                self.handle(queue.get_nowait())
        except Exception:  # noqa: BLE001 - queue.Empty: nothing (more) now
            return

    def count_progress(self) -> None:
        counts = self.ipc["counts"]
        for i in range(2 * self.n):
            new, self.seen[i] = counts[i] - self.seen[i], counts[i]
            if self.progress is not None:
                for _ in range(new):
                    self.progress.request_done(i % 2 == 0)

    def line_up(self) -> None:
        """Every worker waits before a tier pass: mark it, then let them go."""
        self.count_progress()
        if self.progress is not None:
            if self.passes:
                self.progress.tier_ended()
            tier = self.tiers[str(self.sync_label)]
            self.progress.tier_started(
                self.job.variant, tier, self.job.settings.requests_per_tier
            )
        self.passes += 1
        self.synced.clear()
        log.info(
            "%s %s: pass %d on %d client processes",
            self.job.variant,
            self.sync_label,
            self.passes,
            self.n,
        )
        with contextlib.suppress(threading.BrokenBarrierError):
            self.ipc["barrier"].wait(SYNC_TIMEOUT_S)

    def check_alive(self) -> None:
        for k, p in enumerate(self.procs):
            if p.exitcode is None or k in self.results or k in self.errors:
                continue
            self.drain(0.5)  # its last words may still be in the queue
            if k in self.results or k in self.errors:
                continue
            self.errors[k] = LoadTestError(
                f"client worker {k} exited with code {p.exitcode} without a result"
            )
            if self.stop is None:
                self.fail(f"client worker {k} exited with code {p.exitcode}")
            self.ipc["barrier"].abort()

    def loop(self) -> None:
        aborted = False
        while not self.finished():
            self.drain(POLL_S)
            self.count_progress()
            if (self.stop is not None or self.failure is not None) and not aborted:
                self.ipc["barrier"].abort()  # nobody starts another tier
                aborted = True
            elif len(self.synced) == self.n and not aborted:
                self.line_up()
            self.check_alive()
        self.count_progress()
        if self.passes and self.progress is not None:
            self.progress.tier_ended()

    def reap(self) -> None:
        """Wait for the workers (they end once they have sent their result); terminate,
        then kill, whatever is still there."""
        for p in self.procs:
            if p.pid is not None:
                p.join(JOIN_TIMEOUT_S)
        for p in self.procs:
            if p.pid is not None and p.is_alive():
                p.terminate()
                p.join(5.0)
                if p.is_alive():
                    p.kill()
                    p.join(5.0)
        self.ipc["events"].close()
        self.ipc["events"].cancel_join_thread()


def _relay_health(
    parent: _Parent, health: HealthCheck, done: threading.Event
) -> threading.Thread:
    """Poll ``health`` in a thread with the Watcher's rules; a death goes to the workers."""

    async def watch() -> None:
        watcher = Watcher(threaded(health), parent.fail)
        watcher.start()
        while not done.is_set() and not watcher.dead:
            await asyncio.sleep(POLL_S)
        await watcher.stop()

    thread = threading.Thread(target=asyncio.run, args=(watch(),), daemon=True)
    thread.start()
    return thread


def run_workers(
    target: LoadTarget,
    prompts: Sequence[Prompt],
    tiers: Sequence[Tier],
    settings: LoadSettings,
    variant: str,
    tokenizer: TextTokenizer | None = None,
    progress: Progress | None = None,
    seed: int = 0,
    *,
    files: Sequence[RecordFiles],
    health: HealthCheck | None = None,
    on_start: Callable[[Sequence[int]], None] | None = None,
    passes: Sequence[TierPass] | None = None,
) -> LoadResult:
    """:func:`~trtbench.profiling.loadtest.driver.runner.run_load` with ``len(files)`` client
    processes; worker k streams its records to ``files[k]``.

    Args:
        target, prompts, tiers, settings, variant, tokenizer, progress, seed: as for
            ``run_load`` (all must pickle: they are sent to spawned processes).
        files: one pair of part files per worker (their number is N ≥ 1).
        health: a blocking server check polled by the parent (see the module doc).
        on_start: called with the workers' process ids once they run (tests).
        passes: the tier passes to run (default: every tier, every repeat; as
            ``run_load``).

    Returns:
        The merged :class:`LoadResult` (``stop_signal`` after a stop signal, as one
        process would return it; a crashed worker is a ``server_failure`` line).

    Raises:
        LoadTestError (or the worker's own error): a worker failed before any tier, e.g.
            every warmup request failed, and no stop signal came.
    """
    if not files:
        raise ValueError("run_workers needs one RecordFiles per worker")
    job = WorkerJob(
        target,
        tuple(prompts),
        tuple(tiers),
        settings,
        variant,
        tokenizer,
        seed,
        tuple(files),
        health is not None,
        None if passes is None else tuple(passes),
    )
    parent = _Parent(job, progress)
    done = threading.Event()
    watcher: threading.Thread | None = None
    with parent.signals():
        try:
            for p in parent.procs:
                p.start()
            if on_start is not None:
                on_start([p.pid for p in parent.procs if p.pid is not None])
            watcher = _relay_health(parent, health, done) if health else None
            parent.loop()
        finally:
            done.set()
            parent.reap()
    if watcher is not None:
        watcher.join(5.0)
    merged = merge_results(
        [parent.results[k] for k in sorted(parent.results)],
        parent.stop,
        parent.failure,
        parent.failed_tier,
    )
    for t in merged.tiers:
        log.info("%s %s: %s", variant, t.tier, t.line())
    if parent.errors and not merged.tiers and parent.stop is None:
        raise parent.errors[min(parent.errors)]  # e.g. every warmup request failed
    return merged


def worker_parts(files: RecordFiles, n: int) -> list[RecordFiles]:
    """Worker k's part files beside ``files``: ``<stem>.w<k>.<kind>.csv`` (same fields)."""

    def of(k: int, path: Path | None) -> Path | None:
        if path is None:
            return None
        head, _, kind = path.name.rpartition(".")[0].rpartition(".")
        return path.with_name(f"{head}.w{k}.{kind}.csv")

    return [
        RecordFiles(**{f.name: of(k, getattr(files, f.name)) for f in fields(files)})
        for k in range(n)
    ]


def concat_parts(parts: Sequence[RecordFiles], into: RecordFiles) -> None:
    """Append the rows of every worker's part files to ``into`` (header once), streaming,
    and remove the parts. Missing parts (a worker that never started) are skipped.

    Raises:
        OSError: a file cannot be read or written.
    """
    for f in fields(into):
        dest: Path | None = getattr(into, f.name)
        sources = [getattr(p, f.name) for p in parts]
        if dest is None:
            continue
        for src in sources:
            if src is None or not src.is_file():
                continue
            with src.open("rb") as s:
                header = s.readline()
                new = not dest.is_file() or dest.stat().st_size == 0
                with dest.open("ab") as d:
                    if new:
                        d.write(header)
                    shutil.copyfileobj(s, d)
            src.unlink()


def clear_parts(parts: Sequence[RecordFiles]) -> None:
    """Remove part files left by an earlier, killed measurement."""
    for p in parts:
        for f in fields(p):
            path = getattr(p, f.name)
            if path is not None:
                path.unlink(missing_ok=True)


def run_in_parts(files: RecordFiles, n: int, *args: Any, **kwargs: Any) -> LoadResult:
    """:func:`run_workers` with ``n`` workers writing :func:`worker_parts` of ``files``;
    their rows are appended to ``files`` afterwards (also after a stop or an error), so
    whoever merges ``files`` needs to know nothing about workers. Other arguments: as
    for :func:`run_workers`."""
    parts = worker_parts(files, n)
    clear_parts(parts)
    try:
        return run_workers(*args, files=parts, **kwargs)
    finally:
        concat_parts(parts, files)

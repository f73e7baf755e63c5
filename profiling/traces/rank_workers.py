"""Rank traces analysed in worker processes: one rank per process, stop signals honoured.

:func:`run_rank_pool` runs :func:`analyze_one` for each rank in at most ``jobs`` forked
processes (no rank queued behind the running ones, so a stop starts nothing new); the worker
side of a stop signal is :func:`_worker_init`. Used by
:func:`~trtbench.profiling.traces.ranks.analyze_ranks`; ``trtbench analyze`` calls
:func:`analyze_one` directly for a single trace.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from trtbench.core.errors import ConfigError, TraceParseError
from trtbench.core.stop_signals import STOP_SIGNALS, StopSignal
from trtbench.profiling.traces.kineto_stream import analyze_kineto_stream
from trtbench.profiling.traces.nsys_stream import (
    WrittenAnalysis,
    analyze_nsys_export,
)


@dataclass(frozen=True)
class RankFile:
    """One rank's trace: its rank number, file and output folder name."""

    rank: int
    path: Path
    label: str


def analyze_one(
    kind: str,
    path: Path,
    out_dir: Path,
    step_pattern: str | None,
    fmt: str,
    workers: int = 1,
) -> WrittenAnalysis:
    """One trace's tables written into ``out_dir`` (the worker of :func:`analyze_ranks`; the
    single-trace ``trtbench analyze`` too).

    Args:
        kind: ``nsys`` or ``kineto``.
        fmt: ``auto``, ``csv`` or ``parquet`` (see
            :func:`~trtbench.profiling.traces.nsys_stream.analyze_nsys_export`).
        workers: processes decoding a Kineto trace (1 in the rank pool's workers, which
            already run one rank per core).

    The three tables of an earlier run in ``out_dir`` (CSV or Parquet) are removed first, and
    when it does not finish (an error, a stop signal) it leaves none: a table written before
    it stopped, or left from an earlier run, would read as this run's.

    Raises:
        ConfigError, TraceParseError: as the loaders.
    """
    remove_tables(out_dir, folder_too=False)  # an earlier run's, in either format
    try:
        return _analyze_one(kind, path, out_dir, step_pattern, fmt, workers)
    except BaseException:
        remove_tables(out_dir, folder_too=False)
        # parked rows: their context managers remove them, but a signal landing between a
        # folder's creation and its ``with`` would leave one (seen once in a full test run)
        for parked in out_dir.glob("trtbench_*"):
            shutil.rmtree(parked, ignore_errors=True)
        raise


def _analyze_one(
    kind: str,
    path: Path,
    out_dir: Path,
    step_pattern: str | None,
    fmt: str,
    workers: int,
) -> WrittenAnalysis:
    if kind == "nsys":
        return analyze_nsys_export(path, out_dir, step_pattern, fmt)
    return analyze_kineto_stream(path, out_dir, step_pattern, fmt, workers=workers)


def run_rank_pool(
    files: list[RankFile],
    out_dir: Path,
    kind: str,
    step_pattern: str | None,
    fmt: str,
    jobs: int,
    skip_bad: bool,
    bad: list[tuple[RankFile, str]],
    on_done: Callable[[RankFile, int, int], None] | None = None,
) -> list[tuple[RankFile, WrittenAnalysis]]:
    """Run :func:`analyze_one` per rank, at most ``jobs`` at once (none queued behind them); a
    failing rank stops the rest unless ``skip_bad`` (a trace error) — a bad step pattern
    always stops (named with its rank), the running ranks finishing first. ``on_done(rank
    file, ranks finished so far, ranks to analyse)`` is called as each rank finishes.

    A stop signal (:class:`~trtbench.core.stop_signals.StopSignal`) starts no further rank
    and passes the signal to the running workers (each stops its analysis, which removes its
    partial files); it is raised again. However the run ends, a rank without a result in this
    run (stopped, failed, skipped, never started) keeps no table and no empty folder — a
    table left from an earlier run would read as this run's; finished ranks keep theirs.
    """
    results: dict[int, WrittenAnalysis] = {}
    try:
        _pool_loop(
            files,
            (out_dir, kind, step_pattern, fmt),
            jobs,
            skip_bad,
            bad,
            results,
            on_done,
        )
    finally:  # a rank without a result in this run keeps no table, nor an empty folder
        for rank_file in files:
            if rank_file.rank not in results:
                remove_tables(out_dir / rank_file.label)
    return [(f, results[f.rank]) for f in files if f.rank in results]


def _pool_loop(
    files: list[RankFile],
    job_args: tuple[Path, str, str | None, str],
    jobs: int,
    skip_bad: bool,
    bad: list[tuple[RankFile, str]],
    results: dict[int, WrittenAnalysis],
    on_done: Callable[[RankFile, int, int], None] | None,
) -> None:
    """The loop of :func:`run_rank_pool`, filling ``results``."""
    out_dir, kind, step_pattern, fmt = job_args
    workers = max(1, min(jobs, len(files)))
    queue = list(files)
    running: dict[Future, RankFile] = {}
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_worker_init
    ) as pool:
        try:
            while queue or running:
                while queue and len(running) < workers:
                    f = queue.pop(0)
                    job = pool.submit(
                        analyze_one, kind, f.path, out_dir / f.label, step_pattern, fmt
                    )
                    running[job] = f
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    rank_file = running.pop(future)
                    exc = future.exception()
                    if exc is None:
                        results[rank_file.rank] = future.result()
                        if on_done is not None:
                            on_done(rank_file, len(results), len(files))
                    elif isinstance(exc, TraceParseError) and skip_bad:
                        bad.append((rank_file, str(exc)))
                    else:  # stop: queued ranks are dropped, running ones finish
                        queue.clear()
                        if isinstance(exc, ConfigError):  # name the rank it failed on
                            raise ConfigError(
                                f"rank {rank_file.rank} ({rank_file.path.name}): {exc}"
                            ) from exc
                        raise exc
        except StopSignal as stop:
            queue.clear()
            for child in multiprocessing.active_children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, stop.signum)
            wait(running)
            raise


def _worker_init() -> None:
    """In each worker: the first stop signal raises
    :class:`~trtbench.core.stop_signals.StopSignal` (the analysis unwinds and removes its
    partial files); later ones are ignored, so the clean-up is not cut short."""

    def stop_once(signum: int, _frame: object) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise StopSignal(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, stop_once)


def remove_tables(folder: Path, *, folder_too: bool = True) -> None:
    """The three tables of one trace in ``folder`` (any format); then the folder, when
    ``folder_too`` and it is empty."""
    for name in ("kernel_launches", "launch_summary", "steps"):
        for suffix in (".csv", ".parquet"):
            (folder / f"{name}{suffix}").unlink(missing_ok=True)
    if folder_too:
        with contextlib.suppress(OSError):
            folder.rmdir()

"""The periodic-sampler machinery shared by the memory sampler and the /metrics scraper.

A :class:`PeriodicSampler` is a context manager that runs ``_read(phase)`` in its own thread on
a fixed schedule: deadlines ``t0 + k·interval`` on ``time.perf_counter`` (monotonic); a reading
that overruns one or more deadlines makes the thread skip them (counted in ``missed_ticks``)
instead of firing a burst. The thread records its own exceptions (``errors``, ``error_count``;
logged once) and goes on; it gives up after :data:`MAX_CONSECUTIVE_ERRORS` failures in a row.
``mark(phase)`` labels the following readings and takes one reading at the boundary, so a
phase's first reading is taken when it begins. ``__exit__`` always stops and joins the thread,
so a ``with`` block stops it as a ``finally`` around the measured region would.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

R = TypeVar("R")

MAX_CONSECUTIVE_ERRORS = 10
MAX_KEPT_ERRORS = 20


@dataclass(frozen=True)
class PhaseMark:
    """When ``mark`` switched to ``phase`` (``time.perf_counter_ns()``)."""

    t_ns: int
    phase: str


class PeriodicSampler(Generic[R]):
    """Base class: subclasses implement :meth:`_read` and may override ``_open``/``_close``.

    Args:
        interval_ms: period of the schedule (> 0).
        phase: label of the readings before the first :meth:`mark`.
        variant: kept for subclasses' records and the thread name.

    Raises:
        ValueError: ``interval_ms`` is not positive (a programming error).
    """

    kind = "sampler"
    #: take one last reading in ``stop()`` (before ``_close``), closing the last phase.
    read_on_stop = False

    def __init__(self, *, interval_ms: float, phase: str, variant: str) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be > 0, got {interval_ms}")
        self.interval_s = interval_ms / 1000.0
        self.variant = variant
        self._phase = phase
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._records: list[R] = []
        self._consecutive = 0
        self.marks: list[PhaseMark] = []
        self.errors: list[str] = []
        self.error_count = 0
        self.missed_ticks = 0

    # -- to override -----------------------------------------------------------------------
    def _open(self) -> None:
        """Acquire resources before the thread starts."""

    def _close(self) -> None:
        """Release resources after the thread stopped."""

    def _read(self, phase: str) -> list[R]:
        """One reading: the records to keep (may raise; the base class records it)."""
        raise NotImplementedError

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> PeriodicSampler[R]:
        self._open()
        self._thread = threading.Thread(
            target=self._run, name=f"{self.kind}-{self.variant}", daemon=True
        )
        try:
            self._thread.start()
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop and join the thread, take the closing reading, release (idempotent)."""
        if self._stop.is_set() and self._thread is None:
            return
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            thread.join(timeout=max(5.0, 10 * self.interval_s))
            if thread.is_alive():
                log.warning("%s thread did not stop; resources left open", self.kind)
                return
        if self.read_on_stop and thread is not None:
            self._read_guarded()
        self._close()
        if self.error_count:
            log.warning(
                "%s: %d failed readings (first: %s)",
                self.kind,
                self.error_count,
                self.errors[0],
            )

    # -- phases and results ----------------------------------------------------------------
    def mark(self, phase: str) -> None:
        """Label the following readings ``phase``; while running, read at the boundary."""
        with self._lock:
            self._phase = phase
            self.marks.append(PhaseMark(time.perf_counter_ns(), phase))
        if self.running:
            self._read_guarded()

    @property
    def records(self) -> list[R]:
        """A copy of the records so far, in time order."""
        with self._lock:
            return list(self._records)

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        t0 = time.perf_counter()
        tick = 0
        while not self._stop.is_set():
            if not self._read_guarded():
                log.warning(
                    "%s stopped after %d failures in a row (last: %s)",
                    self.kind,
                    MAX_CONSECUTIVE_ERRORS,
                    self.errors[-1],
                )
                return
            tick += 1
            now = time.perf_counter()
            late_by = now - (t0 + tick * self.interval_s)
            if late_by >= 0:  # the reading overran deadlines: skip them, never burst
                skipped = int(late_by // self.interval_s) + 1
                tick += skipped
                self.missed_ticks += skipped
            self._stop.wait(t0 + tick * self.interval_s - now)

    def _read_guarded(self) -> bool:
        """Take one reading and keep its records; on error record it.

        Returns:
            False once :data:`MAX_CONSECUTIVE_ERRORS` readings in a row failed.
        """
        with self._lock:
            try:
                self._records.extend(self._read(self._phase))
                self._consecutive = 0
            except Exception as exc:  # the thread must outlive any one bad reading
                self.error_count += 1
                self._consecutive += 1
                if len(self.errors) < MAX_KEPT_ERRORS:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                if self.error_count == 1:
                    log.warning("%s reading failed: %s", self.kind, self.errors[0])
            return self._consecutive < MAX_CONSECUTIVE_ERRORS

"""One line per stage on the terminal while a run works: the builds, the server starts, the
load test's cells.

:class:`StageLines` receives the run's stages (:class:`trtbench.pipeline.stages.RunProgress`)
and, for ``trtbench loadtest``, the load generator's tier progress (each tier pass a cell).
On a terminal each stage is one line redrawn in place (rich ``Live``, on stderr)::

    load test, ≤ 8 rounds: cell 23 of ≤ 160 · ETA ≤ 3:20 · round 3 · c4 medusa · 1:12 elapsed

and it ends as ``load test, ≤ 8 rounds: 60 of 60 cells in 2:11``. Anywhere else (CI, a pipe,
``| tee``) the same line is printed only when another tenth of the stage is done and at
least :data:`PLAIN_GAP_S` after the last one, then once at its end: at most ten lines a
stage, never one per cell. The ETA is the mean time of the items done so far times the items
left; with rounds by need (``loadtest.rounds: auto``) the total is an upper bound, and so is
the ETA (``≤``), which a time budget (``loadtest.budget.max_minutes``) also caps: its minutes
left plus one round (``RacePlan.seconds_left``). What each cell measured (requests, errors,
tok/s, wall time) is in ``RUN_DIR/trtbench.log``, one line per cell (the load generator's).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.text import Text

from trtbench.pipeline.stages import CELL, cell_label
from trtbench.profiling.loadtest.workload.schedule import Tier

PLAIN_GAP_S = 30.0
"""Off a terminal, the least time between two progress lines of a stage (its last line,
at its end, always comes): a stage of a few seconds prints its end line only."""
TENTHS = 10
"""Off a terminal, a stage's line comes each time another 1/TENTHS of it is done."""


def clock_text(seconds: float) -> str:
    """``0:41``, ``12:05``, ``1:02:03`` (whole seconds; negative reads 0:00)."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class StageState:
    """One stage as far as it got (times from the progress's clock, seconds).

    Attributes:
        name: ``build``, ``deploy``, ``load test, ≤ 8 rounds`` (…).
        total: items in the stage (an upper bound when ``at_most``).
        unit: what an item is (``variant``, ``server``, ``cell``).
        started: when the stage started; last: when the last item was done.
        done: items done; label: the last one's name.
        ends_by: when a time budget ends the stage at the latest (None: no budget).
    """

    name: str
    total: int
    unit: str
    at_most: bool
    started: float
    last: float
    done: int = 0
    label: str = ""
    ends_by: float | None = None

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left: mean seconds per item done × items left (None before the first);
        with a time budget (:attr:`ends_by`), at most the seconds from ``now`` to it."""
        if not self.done:
            return None
        eta = (self.last - self.started) / self.done * max(0, self.total - self.done)
        if self.ends_by is not None and now is not None:
            eta = min(eta, max(0.0, self.ends_by - now))
        return eta

    def text(self, now: float) -> str:
        """The stage's progress line at ``now``."""
        bound = "≤ " if self.at_most else ""
        parts = [f"{self.name}: {self.unit} {self.done} of {bound}{self.total}"]
        eta = self.eta_s(now)
        if eta is not None:
            parts.append(f"ETA {bound}{clock_text(eta)}")
        if self.label:
            parts.append(self.label)
        parts.append(f"{clock_text(now - self.started)} elapsed")
        return " · ".join(parts)

    def end_text(self, now: float) -> str:
        """The stage's last line: ``load test: 60 of 60 cells in 2:11``; a stage that
        stopped before its total says so."""
        took = clock_text(now - self.started)
        if self.done >= self.total:
            return f"{self.name}: {self.done} of {self.done} {self._units()} in {took}"
        bound = "≤ " if self.at_most else ""
        return (
            f"{self.name}: {self.done} of {bound}{self.total} {self._units()} in {took} "
            "(stopped early)"
        )

    def _units(self) -> str:
        return self.unit if max(self.done, self.total) == 1 else f"{self.unit}s"


class StageLines:
    """The CLI's progress: one line per stage (module docstring); a context manager whose
    exit ends the stage still open.

    Args:
        console: where the lines go (default: stderr as it is at each write).
        clock: seconds, monotonic (tests pass a scripted one).

    Attributes:
        live: whether each stage is one line redrawn in place (the console is a terminal).
    """

    def __init__(
        self,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console, self.clock = console or Console(stderr=True), clock
        self.live = self.console.is_terminal and not self.console.is_dumb_terminal
        self._stage: StageState | None = None
        self._end: str | None = None
        self._shown: Live | None = None
        self._tenth, self._printed = 0, 0.0
        self._tier: tuple[str, str] | None = None
        self._passes: dict[tuple[str, str], int] = {}

    def __enter__(self) -> StageLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # trtbench.pipeline.stages.RunProgress

    def start(self, stage: str, total: int, unit: str, at_most: bool = False) -> None:
        """A new stage (ends the one before)."""
        self.stop()
        now = self.clock()
        self._stage = StageState(stage, total, unit, at_most, now, now)
        self._tenth, self._printed, self._end = 0, now, None
        if self.live and total > 0:
            self._shown = Live(
                get_renderable=self._render,
                console=self.console,
                refresh_per_second=4,
                transient=False,
                # prints above the line while it is drawn; stdout only when it is on the
                # screen too (a redirected stdout keeps what is written to it)
                redirect_stdout=sys.stdout.isatty(),
                redirect_stderr=True,
            )
            self._shown.start()

    def advance(self, label: str) -> None:
        """One more item done (``label``: its name)."""
        stage = self._stage
        if stage is None:
            return
        now = self.clock()
        stage.done, stage.label, stage.last = stage.done + 1, label, now
        if self._shown is None and self._due(stage, now):
            self._write(stage.text(now))

    def retotal(
        self, total: int, at_most: bool, seconds_left: float | None = None
    ) -> None:
        """The stage's total of cells changed (a race dropped cells, or ended); a stage of
        other units keeps its own (a race is planned while the build's line is up).
        ``seconds_left``: a time budget's bound on the seconds the stage has left."""
        stage = self._stage
        if stage is not None and stage.unit == CELL:
            stage.total, stage.at_most = total, at_most
            stage.ends_by = (
                None if seconds_left is None else self.clock() + seconds_left
            )

    def stop(self) -> None:
        """End the stage: its last line stays; a stage that did nothing leaves none (an
        error stopped it before its first item: the error's line says why)."""
        stage, self._stage = self._stage, None
        if stage is None:
            return
        if stage.done:
            self._end = stage.end_text(self.clock())
        if self._shown is not None:
            self._shown.transient = not stage.done  # erase a line that said nothing
            self._shown.refresh()
            self._shown.stop()
            self._shown = None
        elif self._end is not None:
            self._write(self._end)

    # trtbench.profiling.loadtest.clients.target.Progress (trtbench loadtest)

    def tier_started(self, variant: str, tier: Tier, total: int | None) -> None:
        self._tier = (variant, tier.label)

    def request_done(self, ok: bool) -> None:
        pass  # the line counts cells; requests are in the run log

    def tier_ended(self) -> None:
        if self._tier is None:
            return
        rounds = self._passes.get(self._tier, 0)
        self._passes[self._tier] = rounds + 1
        self.advance(cell_label(*self._tier, rounds))
        self._tier = None

    def _due(self, stage: StageState, now: float) -> bool:
        """Off a terminal: another tenth done, long enough after the last line, and not
        the last item (the stage's end line says that)."""
        if stage.total <= 0 or stage.done >= stage.total:
            return False
        tenth = stage.done * TENTHS // stage.total
        if tenth <= self._tenth or now - self._printed < PLAIN_GAP_S:
            return False
        self._tenth, self._printed = tenth, now
        return True

    def _render(self) -> Text:
        stage = self._stage
        text = self._end if stage is None else stage.text(self.clock())
        return Text(text or "", no_wrap=True, overflow="ellipsis")

    def _write(self, line: str) -> None:
        out = self.console.file
        out.write(line + "\n")
        out.flush()

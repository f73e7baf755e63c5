"""Which cells an interleaved run measures next: all of a fixed design's at once, or a race's
round by round (``loadtest.rounds: auto``).

:class:`FixedPlan` hands over the cells planned before the run. :class:`RacePlan` plans round
r with :func:`~trtbench.profiling.loadtest.workload.design.plan_cells` — the same shuffled,
side-by-side order a fixed run would give round r — keeping only the (variant, tier) cells
still in the race (:func:`~trtbench.profiling.loadtest.stats.racing.race_tier`); it is told
each cell's output tok/s as the cell ends, and stops when every tier is settled, when
``max_rounds`` rounds ran, or when ``max_minutes`` have passed since the first round began
(checked between rounds: a round that started runs to its end; the first 3 rounds, the
first look, always run, so that every comparison has an interval). Each look is made at
the share of the budget used so far (rounds, or minutes when those run out sooner), and the
look at which the budget ends spends what is left of the error rate
(``stats/decisions.py``, "A time budget").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from trtbench.profiling.loadtest.stats.decisions import (
    LookSchedule,
    next_look_fits,
    planned_rounds,
)
from trtbench.profiling.loadtest.stats.racing import (
    TierRace,
    budget_resolution,
    race_tier,
)
from trtbench.profiling.loadtest.workload.design import INTERLEAVED, Cell, plan_cells
from trtbench.profiling.loadtest.workload.repeats import MIN_ROUNDS
from trtbench.profiling.loadtest.workload.schedule import Tier

SETTLED, MAX_ROUNDS, MAX_MINUTES = "settled", "max_rounds", "max_minutes"


class RoundPlan(Protocol):
    """What the interleaved driver asks between rounds."""

    def next_round(self) -> Sequence[Cell]:
        """The next cells to measure, in order; empty: the run is over."""
        ...

    def cell_done(self, cell: Cell, tokens_per_s: float | None) -> None:
        """``cell`` ended with this output tok/s (None: no figure)."""
        ...


@dataclass
class FixedPlan:
    """A fixed design: every planned cell, in one batch."""

    cells: Sequence[Cell]
    _given: bool = False

    def next_round(self) -> Sequence[Cell]:
        if self._given:
            return []
        self._given = True
        return list(self.cells)

    def cell_done(self, cell: Cell, tokens_per_s: float | None) -> None:
        return None


@dataclass
class RoundByRound:
    """A fixed design handed out one round at a time (cells in their planned order), so
    that :class:`InstanceBlocks` can end a block between rounds."""

    cells: Sequence[Cell]
    _next: int = 0

    def next_round(self) -> Sequence[Cell]:
        if self._next >= len(self.cells):
            return []
        r = self.cells[self._next].round
        end = self._next
        while end < len(self.cells) and self.cells[end].round == r:
            end += 1
        batch, self._next = list(self.cells[self._next : end]), end
        return batch

    def cell_done(self, cell: Cell, tokens_per_s: float | None) -> None:
        return None


@dataclass
class InstanceBlocks:
    """``plan``'s rounds in blocks of ``every`` rounds, each measured by freshly started
    servers (``loadtest.restart_every``; docs/aa_check.md, "Server instances").

    Round r belongs to block ``r // every``. The caller asks :meth:`start_block` before it
    starts a block's servers — which asks ``plan`` for the block's first round, so a race
    decides (and may end) before any server starts — then runs this object as the
    block's plan: it hands out that round and the plan's next ones until a round of the
    next block comes, which it keeps for the next block.

    Attributes:
        plan: a :class:`RacePlan` or a :class:`RoundByRound`.
        every: rounds per block (≥ 1).
    """

    plan: RoundPlan
    every: int
    _pending: list[Cell] | None = None
    _block: int = -1

    def start_block(self) -> bool:
        """Whether another block has cells to measure (its first round is taken from
        ``plan`` now, unless the last block already took it)."""
        if self._pending is None:
            self._pending = list(self.plan.next_round())
        if not self._pending:
            return False
        self._block = self._pending[0].round // self.every
        return True

    @property
    def first_round(self) -> int:
        """The block's first round (0-based; -1 before the first block)."""
        return self._pending[0].round if self._pending else -1

    @property
    def variants(self) -> list[str]:
        """The variants of the block's first round (a race never adds one later)."""
        return list(dict.fromkeys(c.variant for c in self._pending or ()))

    def next_round(self) -> Sequence[Cell]:
        if (
            self._pending is not None
            and self._pending
            and (self._pending[0].round // self.every == self._block)
        ):
            batch, self._pending = self._pending, None
            return batch
        if self._pending is not None:  # the next block's, or the end
            return []
        batch = list(self.plan.next_round())
        if batch and batch[0].round // self.every == self._block:
            return batch
        self._pending = batch
        return []

    def cell_done(self, cell: Cell, tokens_per_s: float | None) -> None:
        self.plan.cell_done(cell, tokens_per_s)


@dataclass
class RacePlan:
    """A race over rounds (module docstring).

    Attributes:
        variants: in spec order; tiers: the spec's tiers; seed: the load test's seed.
        schedule, margin: as for :func:`race_tier`; each look made is added to the
            schedule (``LookSchedule.made``).
        max_minutes: the time budget (None: none).
        tiers_of_variant: variant → the tier labels it is measured at (None: every tier;
            the follow-up measures each best fixed variant at its own tiers).
        on_round: called with every cell handed out so far, each time a round is planned
            and once the race is over (run.json's ``design`` is rewritten there).
        cells: every cell handed out so far (run.json's order).
        races: tier label → its race after the last round.
        stopped_because: ``settled``, ``max_rounds`` or ``max_minutes`` once over.
        resolution: tier label → variant → the smallest ratio the whole budget would tell
            from 1 (:func:`~trtbench.profiling.loadtest.stats.racing.budget_resolution`),
            from the spread of the first look (3 rounds); empty before it.
        expected_rounds: the rounds the budget is expected to hold, from the first look
            (:func:`~trtbench.profiling.loadtest.stats.decisions.planned_rounds` with a
            time budget, else ``max_rounds``); what :attr:`resolution` is computed at.
    """

    variants: Sequence[str]
    tiers: Sequence[Tier]
    seed: int
    schedule: LookSchedule
    margin: float
    max_minutes: float | None = None
    on_round: Callable[[RacePlan], None] | None = None
    tiers_of_variant: Mapping[str, Sequence[str]] | None = None
    cells: list[Cell] = field(default_factory=list)
    races: dict[str, TierRace] = field(default_factory=dict)
    stopped_because: str | None = None
    resolution: dict[str, dict[str, float]] = field(default_factory=dict)
    _figures: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    _active: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _round: int = 0
    _started: float | None = None
    _failed: set[tuple[str, str]] = field(default_factory=set)
    expected_rounds: int | None = None
    _last_look: tuple[int, float] = (0, 0.0)
    _planned_at: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        only = self.tiers_of_variant
        self._active = {
            t.label: tuple(
                v for v in self.variants if only is None or t.label in only.get(v, ())
            )
            for t in self.tiers
        }

    @property
    def rounds_run(self) -> int:
        return self._round

    def seconds_left(self, now: float) -> float | None:
        """Seconds until the race ends at the latest, as its time budget bounds it: the
        minutes left plus one round (a race ends only between rounds), or, before the
        first look (which the minutes cannot end a race before), the rounds up to it;
        rounds counted at the longest a round has taken so far (``now``: seconds on
        ``time.monotonic``'s clock, the one the race keeps). None: no time budget, no
        round finished yet, or the race is over.

        A guide for the progress line's ETA (a round that takes longer than every one
        before it, e.g. with fresh servers, can pass it by its excess)."""
        marks = self._planned_at
        if self.max_minutes is None or self.stopped_because or len(marks) < 2:
            return None
        longest = max(b - a for a, b in zip(marks, marks[1:], strict=False))
        in_round = now - marks[-1]
        budget_left = 60.0 * self.max_minutes - (now - marks[0])
        # the round under way when the minutes run out is the last; before the first
        # look, the rounds up to it (this one included) all run
        to_look = (MIN_ROUNDS - self._round + 1) * longest - in_round
        return max(budget_left + longest, longest - in_round, to_look, 0.0)

    def cell_done(self, cell: Cell, tokens_per_s: float | None) -> None:
        if tokens_per_s is not None and tokens_per_s > 0:
            tier = self._figures.setdefault(cell.tier.label, {})
            tier.setdefault(cell.variant, {})[cell.round] = tokens_per_s
        else:  # no figure (every request failed, its server died): out of the race there
            self._failed.add((cell.tier.label, cell.variant))

    def _drop_failed(self) -> None:
        """A variant whose cell gave no figure is not measured again at that tier (its
        tier is not complete: it is left out of the answer there), so that the others
        can still be decided."""
        for label, active in self._active.items():
            self._active[label] = tuple(
                v for v in active if (label, v) not in self._failed
            )

    def _ending(self, now: float) -> str | None:
        """Why the budget ends the race after this round (None: it does not): its
        ``max_rounds``; or, once the first look has come, its minutes: spent, or too few
        left for the rounds up to the next look at the pace since the last one (the look
        now is then the last, and spends the rest of α: a look just before the end would
        leave the last one almost nothing)."""
        n = self._round
        if n >= (self.schedule.max_rounds or 0):
            return MAX_ROUNDS
        if self.max_minutes is None or self._started is None or n < MIN_ROUNDS:
            return None
        elapsed, budget = now - self._started, 60.0 * self.max_minutes
        if elapsed >= budget:
            return MAX_MINUTES
        if self.schedule.is_look(n):
            following = next(m for m in self.schedule.looks() if m > n)
            if not next_look_fits(n, elapsed, self._last_look, following, budget):
                return MAX_MINUTES
        return None

    def _fraction(self, now: float) -> float:
        """The budget used so far, ``max(n / N, elapsed / max_minutes)`` (decisions.py, "A
        time budget"); below 1 unless the budget ends here."""
        t = self._round / (self.schedule.max_rounds or self._round)
        if self.max_minutes is not None and self._started is not None:
            t = max(t, (now - self._started) / (60.0 * self.max_minutes))
        return min(t, 1.0)

    def _look(self, t: float, now: float) -> None:
        """Make a look at information fraction ``t``: record it in the schedule, then
        decide every tier whose still-measured variants all have figures."""
        self.schedule = self.schedule.looked(self._round, t)
        if self._started is not None:
            self._last_look = (self._round, now - self._started)
        if self.expected_rounds is None and self.schedule.max_rounds is not None:
            self.expected_rounds = self.schedule.max_rounds
            if self.max_minutes is not None and self._started is not None:
                self.expected_rounds = planned_rounds(
                    max(now - self._started, 1e-6),
                    self._round,
                    60.0 * self.max_minutes,
                    self.schedule.max_rounds,
                )
        for tier in self.tiers:
            active = self._active[tier.label]
            if not active:
                continue
            figs = self._figures.get(tier.label, {})
            if any(v not in figs for v in active):  # a cell without a figure
                continue  # no decision on missing evidence: measure again
            race = race_tier(tier.label, figs, active, self.schedule, self.margin)
            self.races[tier.label] = race
            self._active[tier.label] = race.active
            if tier.label not in self.resolution:
                self.resolution[tier.label] = budget_resolution(
                    figs, race.leader, self.schedule, rounds=self.expected_rounds
                )

    def next_round(self) -> Sequence[Cell]:
        if self.stopped_because is not None:
            return []
        now = time.monotonic()
        if self._started is None:
            self._started = now
        else:
            self._drop_failed()
            ending = self._ending(now)
            if self._round >= MIN_ROUNDS and (
                ending or self.schedule.is_look(self._round)
            ):
                # between looks every cell still in the race runs again
                self._look(1.0 if ending else self._fraction(now), now)
            if not any(self._active.values()):
                self.stopped_because = SETTLED
            else:
                self.stopped_because = ending
            if self.stopped_because is not None:
                if self.on_round is not None:
                    self.on_round(self)
                return []
        r = self._round
        planned = plan_cells(
            INTERLEAVED,
            self.variants,
            self.tiers,
            r + 1,
            self.seed,
            {
                v: [t for t, vs in self._active.items() if v in vs]
                for v in self.variants
            },
        )
        start = len(self.cells)
        batch = [
            Cell(start + k, c.round, c.tier_index, c.tier, c.variant)
            for k, c in enumerate(c for c in planned if c.round == r)
        ]
        self.cells += batch
        self._round += 1
        self._planned_at.append(now)
        if self.on_round is not None:
            self.on_round(self)
        return batch

    def as_json(self) -> dict[str, object]:
        """run.json ``design.stopping``'s outcome: rounds run, why the race stopped (None:
        still running, or stopped by a signal or a dead server) and, per tier, the leader,
        each comparison's class and the variants still measured at the end."""
        return {
            "looks": [[n, t] for n, t in self.schedule.made],
            "rounds_run": self._round,
            "stopped_because": self.stopped_because,
            "tiers": {
                label: {
                    "leader": race.leader,
                    "decisions": {c.b: c.decision.decision for c in race.comparisons},
                    "active": list(race.active),
                    "budget_resolves": self.resolution.get(label, {}),
                }
                for label, race in self.races.items()
            },
        }

"""How a paired comparison is decided, and how its interval stays valid when the run looks at
it after every block of rounds and stops once it is decided (pure).

**Classes** of a ratio "A over B" (> 1: A is better) with interval ``[low, high]`` and an
equivalence margin ``m`` (``report.equivalence_margin``, default 5 %):

* ``better``: ``low > 1``; ``worse``: ``high < 1``;
* ``equivalent``: the interval holds 1 and lies within ``[1 / (1 + m), 1 + m]`` — the
  interval form of two one-sided tests (Schuirmann 1987, J. Pharmacokinet. Biopharm. 15:657),
  here at the interval's own level, which is conservative;
* ``open``: none of these: the run could not tell. Its **resolution** is the interval itself:
  a true difference anywhere between ``low − 1`` and ``high − 1`` could not be told apart.

The classes exclude each other, and each decided class is a true statement whenever the
interval covers the true ratio: the error rate of a decision is at most the interval's
non-coverage.

**Looks.** A run with ``loadtest.rounds: auto`` forms its comparisons after every block of
``LOOK_EVERY`` (3) rounds — at ``n = 3, 6, 9, …`` paired rounds and at ``N``, the budget's
``max_rounds`` — and stops measuring a comparison once it is decided. A 95 % interval looked
at again and again would cover less than 95 % of the time (the more looks, the less). So
each look spends part of the error rate: the look at ``n`` rounds, following the look at
``m`` (``m = 0`` for the first), builds its Student-t interval at level ``1 − α_n`` with

    α_n = α · (G(n / N) − G(m / N)),  G(t) = (1 − s) · t² for t < 1,  G(1) = 1

the power-family alpha-spending function of Kim & DeMets (1987, Biometrika 74:149) in the
scheme of Lan & DeMets (1983, Biometrika 70:659), with a share ``s`` = ``FINAL_SHARE`` (½)
of α kept for the last look, as Haybittle (1971, Br. J. Radiol. 44:793) and Peto et al.
(1976, Br. J. Cancer 34:585) keep nearly all of it for the final analysis: the looks before
it decide only clear differences (they drop the variants that are clearly behind), and the
last, where the close comparisons are settled, states its interval at 97.5 % or more rather
than at the last sliver of t². (Runs recorded before trtbench recorded its looks spent
α · (t² − m²/N²) with no share kept: their reports state them so.) The α_n add up to α = 5 %, so by the
union bound the probability that *any* look's interval misses the true ratio is at most 5 %:
the interval stated when the run stops covers with at least 95 %. (The union bound ignores
the correlation between looks, which a group-sequential boundary would use; the intervals
are therefore a little wider than they need be, never narrower.) Looking after every block
rather than every round spends α on fewer looks: each is narrower (docs/aa_check.md).

**A time budget.** With ``max_minutes`` a run may stop long before ``max_rounds``; spread
over ``N`` rounds, the looks would leave most of α to looks that never come (at 13 of 36
rounds, the next look holds α · ((15/36)² − (12/36)²) = 0.31 %). So a race with a time budget
measures its progress in the budget it has used: the look after ``n`` rounds, ``e`` seconds
into a budget of ``B``, is at the information fraction ``t = max(n / N, e / B)`` (calendar time
as the information scale, as Lan & DeMets 1983 allow) and spends α · (F(t) − F(t_prev)); the
look at which the budget ends has ``t = 1`` and spends the rest: ``n = N``; the time spent,
whatever ``n``; or too little time left for the rounds up to the next look at the pace since
the last one (a look just before the end would otherwise leave the last one almost nothing). The fractions come from the clock and the round count, never from a
comparison's figures, and they add up to α, so the union bound below holds. The looks made,
``(n, t)``, are recorded (run.json ``design.stopping.looks``) and every interval of the run is
stated from them (:attr:`LookSchedule.made`). A cell's length enters ``e``, so ``t`` is not
strictly independent of the figures; a slow cell moves ``t`` by its share of the budget (about
1 % for a 1.5 s cell in 2.5 minutes), and the level by far less.

A run that stops between looks — a signal, a dead server: none of them chosen by its
figures — makes no more looks, so its intervals after the last look spend the rest of α
(with recorded looks; a run that recorded none states the level of the look it did not reach,
the next one). A look at fewer than 3
rounds decides nothing. A run with a fixed number of rounds looks once, at the end: its
interval is the plain 95 % one. docs/aa_check.md states what the looks cost in width
against a fixed design.

**Server instances.** Two identical variants, each on its own server process, differ by a
few per cent that stay fixed for the life of the processes (memory layout, thread placement:
docs/aa_check.md measured a log-ratio SD of about 3.6 % between twin servers on a 2-core
host). Pairing rounds in time removes the host's drift, not this; more rounds on the same
processes narrow the interval around it. So every interval carries an **instance term**
τ² · Σ_b (n_b / n)² (``loadtest.instance_sd`` = τ, recorded in run.json's ``design``), which
shrinks only as the rounds spread over fresh server processes (``loadtest.restart_every``):
with one set of servers, no interval is narrower than ±1.96 τ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trtbench.profiling.loadtest.workload.repeats import (
    CONFIDENCE,
    MIN_ROUNDS,
    instance_interval,
    log_t_interval,
)

BETTER, WORSE, EQUIVALENT, OPEN = "better", "worse", "equivalent", "open"
DECISIONS = (BETTER, WORSE, EQUIVALENT, OPEN)
DECIDED = (BETTER, WORSE, EQUIVALENT)
DEFAULT_EQUIVALENCE_MARGIN = 0.05
LOOK_EVERY = 3
"""A race looks after every this many rounds (and at its budget's last round)."""
SPENDING_POWER = 2.0
"""ρ of the spending function ``F(t) = t^ρ`` (1: front-loaded like Pocock's, 3: like
O'Brien–Fleming's; 2 lies between)."""
FINAL_SHARE = 0.5
"""The share of α kept for a race's last look (module docstring, "Looks")."""


def spent_by(t: float) -> float:
    """G(t): the share of α spent by the looks up to information fraction ``t`` (module
    docstring): ``(1 − FINAL_SHARE) · t^ρ`` before the last look, 1 at it (``t`` ≥ 1)."""
    return 1.0 if t >= 1.0 else (1.0 - FINAL_SHARE) * t**SPENDING_POWER


@dataclass(frozen=True)
class LookSchedule:
    """When a run's comparisons are looked at and at which level (module docstring).

    Attributes:
        max_rounds: ``N``, the most rounds the run may measure (``loadtest.budget.
            max_rounds``); None: a fixed design, one look at the end, at 95 %.
        alpha: the error rate spent over every look (5 %).
        instance_sd: τ, the SD of a pair's log ratio between two server instances of
            identical variants (module docstring, "Server instances"); 0: no such term
            (a run recorded before trtbench added it).
        restart_every: the rounds each set of server processes measures before fresh
            ones start (None: one set for the whole run).
        made: the looks made so far, ``(rounds, t)`` with ``t`` the information fraction
            (module docstring, "A time budget"); empty: ``t = n / max_rounds`` at every
            look (a run recorded before trtbench recorded its looks).
    """

    max_rounds: int | None = None
    alpha: float = 1.0 - CONFIDENCE
    instance_sd: float = 0.0
    restart_every: int | None = None
    made: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        t_prev = 0.0
        for n, t in self.made:
            if n < MIN_ROUNDS or not t_prev <= t <= 1.0:
                raise ValueError(
                    f"looks must be at {MIN_ROUNDS}+ rounds with fractions rising to at "
                    f"most 1, got {self.made}"
                )
            t_prev = t
        if self.max_rounds is not None and self.max_rounds < MIN_ROUNDS:
            raise ValueError(
                f"max_rounds must be at least {MIN_ROUNDS}, got {self.max_rounds}"
            )
        if not 0.0 <= self.instance_sd < 1.0:
            raise ValueError(f"instance_sd must be in [0, 1), got {self.instance_sd}")
        if self.restart_every is not None and self.restart_every < 1:
            raise ValueError(f"restart_every must be >= 1, got {self.restart_every}")

    def instance_of(self, round_index: int) -> int:
        """The server instance (block) that measured round ``round_index`` (0-based):
        ``round // restart_every``; 0 for every round when servers are not restarted."""
        return round_index // self.restart_every if self.restart_every else 0

    @property
    def sequential(self) -> bool:
        """The run looks after blocks of rounds (``rounds: auto``)."""
        return self.max_rounds is not None

    def looks(self) -> tuple[int, ...]:
        """The rounds a race looks at: every ``LOOK_EVERY``-th from 3, and ``max_rounds``
        (a fixed design: every count from 3 is its one look)."""
        if self.max_rounds is None:
            return ()
        every = range(LOOK_EVERY, self.max_rounds + 1, LOOK_EVERY)
        return tuple(sorted({*every, self.max_rounds}))

    def is_look(self, n: int) -> bool:
        """Whether the race decides after ``n`` rounds (a fixed design: from 3 on)."""
        if self.max_rounds is None:
            return n >= MIN_ROUNDS
        return n in self.looks()

    def alpha_at(self, n: int) -> float:
        """α_n, the error rate the interval stated at ``n`` paired rounds spends (0 below
        3 rounds; the whole α for a fixed design): that of the first look at ``n`` rounds
        or later. Rounds past ``max_rounds`` (which the run never measures) get the last
        look's share."""
        if n < MIN_ROUNDS:
            return 0.0
        if self.max_rounds is None:
            return self.alpha
        if self.made:
            return self._made_alpha_at(n)
        looks = self.looks()
        k = next((i for i, m in enumerate(looks) if m >= n), len(looks) - 1)
        before = 0.0 if k == 0 else (looks[k - 1] / self.max_rounds) ** SPENDING_POWER
        return self.alpha * ((looks[k] / self.max_rounds) ** SPENDING_POWER - before)

    def _made_alpha_at(self, n: int) -> float:
        """α_n from the looks made: the share of the first made at ``n`` rounds or later;
        past the last one (the run ended between looks), the rest of α."""
        k = next((i for i, (m, _) in enumerate(self.made) if m >= n), None)
        before = self.made[k - 1][1] if k else 0.0
        if k is None:
            before = self.made[-1][1]
        upto = 1.0 if k is None else self.made[k][1]
        return self.alpha * (spent_by(upto) - spent_by(before))

    def looked(self, rounds: int, t: float) -> LookSchedule:
        """This schedule with one more look made (``t`` rounded to 6 decimals, as
        run.json keeps it)."""
        return replace(self, made=(*self.made, (rounds, round(t, 6))))

    def level_at(self, n: int) -> float:
        """The confidence level of the interval stated at ``n`` paired rounds."""
        return 1.0 - self.alpha_at(n)


@dataclass(frozen=True)
class PairDecision:
    """A over B from paired round ratios.

    Attributes:
        ratio: geometric mean of the round ratios (NaN: no pair).
        low, high: its interval at :attr:`level` (None: fewer than 3 pairs).
        rounds: the pairs.
        level: the interval's confidence level (module docstring: below 95 % never).
        decision: one of :data:`DECISIONS`.
    """

    ratio: float
    low: float | None
    high: float | None
    rounds: int
    level: float
    decision: str

    @property
    def decided(self) -> bool:
        return self.decision in DECIDED


def classify(low: float | None, high: float | None, margin: float) -> str:
    """The class of an interval of a ratio (module docstring); ``open`` without one.

    Args:
        low, high: the interval's bounds (ratios, > 0).
        margin: the equivalence margin, e.g. 0.05 for ±5 %.
    """
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return OPEN
    if low > 1.0:
        return BETTER
    if high < 1.0:
        return WORSE
    if low >= 1.0 / (1.0 + margin) and high <= 1.0 + margin:
        return EQUIVALENT
    return OPEN


def decide_pair(
    ratios: np.ndarray | list[float],
    schedule: LookSchedule,
    margin: float = DEFAULT_EQUIVALENCE_MARGIN,
    rounds: np.ndarray | list[int] | None = None,
) -> PairDecision:
    """Decide A over B from its per-round ratios (one per paired round, > 0).

    The interval is the Student-t interval of the log ratios at the schedule's level for
    this many pairs (``log_t_interval``), mapped back; with the schedule's
    ``instance_sd`` > 0, :func:`instance_interval` over the instances of ``rounds`` (the
    0-based round of each ratio; None: 0, 1, 2, …). Then :func:`classify`.

    Raises:
        ValueError: ``rounds`` not of the ratios' length.
    """
    v = np.asarray(ratios, dtype=float)
    idx = np.arange(v.size) if rounds is None else np.asarray(rounds, dtype=int)
    if idx.shape != v.shape:
        raise ValueError(f"{v.size} ratios but {idx.size} rounds")
    keep = ~np.isnan(v) & (v > 0)
    v, idx = v[keep], idx[keep]
    level = schedule.level_at(v.size)
    if v.size < MIN_ROUNDS:  # no interval: the geometric mean alone
        mean = float(np.exp(np.log(v).mean())) if v.size else math.nan
        return PairDecision(mean, None, None, int(v.size), level, OPEN)
    if schedule.instance_sd > 0:
        blocks = np.array([schedule.instance_of(int(r)) for r in idx])
        m, lo, hi = instance_interval(np.log(v), blocks, level, schedule.instance_sd)
        mean, low, high, n = math.exp(m), math.exp(lo), math.exp(hi), int(v.size)
    else:
        mean, low, high, n = log_t_interval(v, level)
    if math.isnan(low):
        return PairDecision(mean, None, None, n, level, OPEN)
    return PairDecision(mean, low, high, n, level, classify(low, high, margin))


def planned_rounds(
    elapsed_s: float, rounds_run: int, budget_s: float, max_rounds: int
) -> int:
    """The rounds a time budget holds at the pace so far, rounded up to a multiple of
    ``LOOK_EVERY``, at least ``rounds_run`` and ``MIN_ROUNDS``, at most ``max_rounds``: what
    the run says its budget can resolve after the first look (a guide: later rounds measure
    fewer cells and go faster).

    Args:
        elapsed_s: seconds from the race's start (before its first servers start) to the
            end of round ``rounds_run``.
        rounds_run: rounds measured so far (≥ 1).
        budget_s: ``max_minutes`` in seconds.
        max_rounds: the budget's ``max_rounds`` (≥ ``MIN_ROUNDS``).

    Example: 3 rounds in 36 s, a 150 s budget: 12.5 rounds fit, so 15.

    Raises:
        ValueError: ``rounds_run`` < 1, or a time that is not positive.
    """
    if rounds_run < 1 or not elapsed_s > 0 or not budget_s > 0:
        raise ValueError(
            f"need rounds_run >= 1 and positive times, got {rounds_run}, "
            f"{elapsed_s}, {budget_s}"
        )
    fit = budget_s * rounds_run / elapsed_s
    looks = LOOK_EVERY * math.ceil(fit / LOOK_EVERY - 1e-9)
    return max(min(looks, max_rounds), rounds_run, MIN_ROUNDS)


def next_look_fits(
    rounds: int,
    elapsed_s: float,
    last_look: tuple[int, float],
    following: int,
    budget_s: float,
) -> bool:
    """Whether the rounds up to the ``following`` look fit in ``budget_s`` at the pace since
    the last look (module docstring, "A time budget"; False: the look after ``rounds`` is
    the last).

    Args:
        rounds: rounds measured (a look).
        elapsed_s: seconds from the race's start to now.
        last_look: ``(rounds, elapsed_s)`` at the look before (``(0, 0.0)`` for the first).
        following: the next look's round count (> ``rounds``).
        budget_s: ``max_minutes`` in seconds.
    """
    pace = (elapsed_s - last_look[1]) / (rounds - last_look[0])
    return elapsed_s + pace * (following - rounds) <= budget_s


def resolution_text(low: float | None, high: float | None) -> str:
    """What an open comparison could not tell apart: ``a difference between -7.0 % and
    +10.2 % could not be told apart`` (its interval as percentages); without an interval,
    that it has none."""
    if low is None or high is None:
        return f"no interval: fewer than {MIN_ROUNDS} paired rounds"
    return (
        f"a difference between {100 * (low - 1):+.1f} % and {100 * (high - 1):+.1f} % "
        "could not be told apart"
    )


def recorded_schedule(design: Mapping[str, Any] | None) -> LookSchedule:
    """The looks of a run from its run.json ``design``: a race (``stopping.max_rounds``,
    ``rounds: auto``) or a fixed design (one look at 95 %; also for a run that recorded
    none, or a value that is not a budget); with the ``instance`` term it recorded
    (``{"sd": τ, "restart_every": k or null}``; none recorded: no term) and the looks it
    made (``stopping.looks``; none recorded: α spread over ``max_rounds``)."""
    if not isinstance(design, Mapping):
        design = {}
    stopping = design.get("stopping")
    most = stopping.get("max_rounds") if isinstance(stopping, Mapping) else None
    if not (
        isinstance(most, int) and not isinstance(most, bool) and most >= MIN_ROUNDS
    ):
        most = None
    made = _recorded_looks(
        stopping.get("looks") if isinstance(stopping, Mapping) else None
    )
    inst = design.get("instance")
    sd, every = 0.0, None
    if isinstance(inst, Mapping):
        given, k = inst.get("sd"), inst.get("restart_every")
        if isinstance(given, (int, float)) and not isinstance(given, bool):
            sd = float(given) if 0.0 <= given < 1.0 else 0.0
        if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
            every = k
    return LookSchedule(
        most, instance_sd=sd, restart_every=every, made=made if most else ()
    )


def _recorded_looks(value: Any) -> tuple[tuple[int, float], ...]:
    """run.json ``design.stopping.looks`` (``[[rounds, t], …]``) as looks made; () when
    absent or not a valid record (the schedule then spreads α over ``max_rounds``)."""
    if not isinstance(value, list):
        return ()
    out: list[tuple[int, float]] = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2):
            return ()
        n, t = item
        if isinstance(n, bool) or not isinstance(n, int):
            return ()
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            return ()
        out.append((n, float(t)))
    try:
        LookSchedule(MIN_ROUNDS, made=tuple(out))
    except ValueError:
        return ()
    return tuple(out)

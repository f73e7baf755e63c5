"""How much better one variant is than another at a tier, by a run's objective, and how sure
(pure: frame rows and rounds.csv in, :class:`Margin` out).

* Objective (``trtbench/spec/report.py``): ``output_tok_s`` (tier table
  ``output_tokens_per_s``, rounds.csv ``output_tokens_per_s``, higher better), ``tpot_p50``
  (``tpot_p50_ms``, lower better), ``goodput`` (summary.csv / rounds.csv
  ``request_goodput_per_s``, higher better).
* Margin of A over B: ``A / B`` for a higher-better objective, ``B / A`` for a lower-better
  one (> 1: A is better).
* Its interval, from rounds.csv where the run has one: the paired ratio of the objective's
  per-round figure, round r of A over round r of B
  (:func:`~trtbench.profiling.report.paired.paired_ratio`); the margin is then that ratio's
  geometric mean. ``basis`` names the design behind it: in an ``interleaved`` or ``rounds``
  run the two sides of a round were measured in the same round, so the interval includes the
  host's drift; in a ``sequential`` run pass r is paired with pass r by number only.
* Its decision (better / worse / equivalent / open,
  :mod:`trtbench.profiling.loadtest.stats.decisions`) at the run's equivalence margin; a run
  that stopped when decided (``rounds: auto``) states the interval at its look's level.
* Runs written before rounds.csv existed: over the baseline the summary's paired speedup
  interval over passes, over another variant the reading of disjoint per-variant intervals
  (``uncertainty.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from trtbench.profiling.loadtest.stats.decisions import (
    DEFAULT_EQUIVALENCE_MARGIN,
    OPEN,
    LookSchedule,
    classify,
)
from trtbench.profiling.report.paired import MIN_ROUNDS, paired_ratio

NO_REPEATS = "no interval: run with loadtest.repeats ≥ 3"
DESIGN_BASIS = {
    "interleaved": "interleaved rounds: both sides measured side by side in each round",
    "rounds": "rounds: both sides measured in each round",
    "sequential": "sequential passes: paired by pass number, not in time; the interval "
    "leaves out drift between the variants",
}
"""How a margin's basis names the design of the run it comes from."""


@dataclass(frozen=True)
class ObjectiveInfo:
    """How an objective reads the tables (module docstring); ``rounds_column``: its
    per-round figure in rounds.csv."""

    name: str
    column: str
    higher_is_better: bool
    label: str
    unit: str
    value_interval: str | None
    ratio_interval: str | None
    interval_note: str
    rounds_column: str


OBJECTIVE_INFO = {
    "output_tok_s": ObjectiveInfo(
        "output_tok_s",
        "output_tokens_per_s",
        True,
        "output tok/s",
        "tok/s",
        "output_tokens_per_s",
        "output_token_throughput_speedup_ratio",
        "paired output tok/s ratio over passes",
        "output_tokens_per_s",
    ),
    "tpot_p50": ObjectiveInfo(
        "tpot_p50",
        "tpot_p50_ms",
        False,
        "TPOT p50",
        "ms",
        None,
        "tpot_speedup_ratio",
        "TPOT mean ratio over passes (repeats give no p50 interval)",
        "tpot_p50_ms",
    ),
    "goodput": ObjectiveInfo(
        "goodput",
        "request_goodput_per_s",
        True,
        "goodput",
        "req/s",
        None,
        None,
        "repeats give no goodput interval",
        "request_goodput_per_s",
    ),
}


@dataclass(frozen=True)
class Margin:
    """How much better the chosen variant is than ``over`` at one tier.

    Attributes:
        over: the variant compared with.
        ratio: margin (> 1: better; module docstring).
        low: lower 95 % bound of the margin, where an interval exists (else None).
        high: upper bound, likewise.
        significant: the interval says it is better (None: no interval).
        basis: how ``significant`` was judged (the design behind the interval), or why it
            could not be.
        rounds: the rounds (pairs) the interval rests on (0: not from rounds.csv).
        decision: better / worse / equivalent / open (open without an interval).
        level: the interval's confidence level.
        equivalence_margin: the margin ``decision`` was judged at (0.05: ±5 %).
    """

    over: str
    ratio: float
    low: float | None
    high: float | None
    significant: bool | None
    basis: str
    rounds: int = 0
    decision: str = OPEN
    level: float = 0.95
    equivalence_margin: float = DEFAULT_EQUIVALENCE_MARGIN


def as_float(v: object) -> float | None:
    """``v`` as a float; None for a missing, non-numeric or NaN value."""
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _no_interval_basis(row: pd.Series, info: ObjectiveInfo) -> str:
    repeats = as_float(row.get("repeats_count"))
    if repeats is not None and repeats >= 2:
        return f"no interval for {info.label}: {info.interval_note}"
    return NO_REPEATS


def level_text(level: float) -> str:
    """A confidence level as text, with the digits it needs never to read 100 %: 0.95 →
    ``95 %``, 0.9948 → ``99.5 %``, 0.99965 → ``99.97 %`` (a finite interval is below 100 %).
    """
    for digits in range(3, 9):
        text = f"{100 * level:.{digits}g}"
        if float(text) < 100 or level >= 1:
            return f"{text} %"
    return f"{100 * level} %"


def _from_rounds(
    best: pd.Series,
    other: pd.Series,
    info: ObjectiveInfo,
    rounds: pd.DataFrame,
    design: str,
    schedule: LookSchedule,
    equivalence: float,
) -> Margin:
    tier = str(best.get("tier", best.name))  # a row indexed by tier: its name
    pr = paired_ratio(
        rounds,
        str(best["variant"]),
        str(other["variant"]),
        tier,
        info.rounds_column,
        info.higher_is_better,
        schedule,
        equivalence,
    )
    over = str(other["variant"])
    if pr.low is None or pr.high is None:
        why = (
            f"no interval: {pr.rounds} paired round(s), a paired interval needs "
            f"{MIN_ROUNDS}; run with loadtest.repeats ≥ 3"
        )
        return Margin(
            over,
            _pooled(best, other, info),
            None,
            None,
            None,
            why,
            pr.rounds,
            equivalence_margin=equivalence,
        )
    level = level_text(pr.level)
    looks = (
        " (rounds by need: the level of its look keeps 95 % coverage under stopping)"
        if schedule.sequential
        else ""
    )
    instance = (
        f", with a server-instance SD of {schedule.instance_sd:.1%}"
        if schedule.instance_sd > 0
        else ""
    )
    basis = (
        f"{level} interval of the paired {info.label} ratio over {pr.rounds} "
        f"{DESIGN_BASIS.get(design, design)}{looks}{instance}"
    )
    return Margin(
        over,
        pr.ratio,
        pr.low,
        pr.high,
        pr.low > 1.0,
        basis,
        pr.rounds,
        pr.decision,
        pr.level,
        equivalence,
    )


def _pooled(best: pd.Series, other: pd.Series, info: ObjectiveInfo) -> float:
    a, b = float(best["value"]), float(other["value"])
    top, bottom = (a, b) if info.higher_is_better else (b, a)
    return top / bottom if bottom > 0 else math.nan  # nan: a zero figure, no ratio


def margin_of(
    best: pd.Series,
    other: pd.Series,
    info: ObjectiveInfo,
    paired: bool,
    rounds: pd.DataFrame | None = None,
    design: str = "sequential",
    schedule: LookSchedule | None = None,
    equivalence: float = DEFAULT_EQUIVALENCE_MARGIN,
) -> Margin:
    """The margin of ``best`` over ``other`` (rows of ``recommendation.objective_frame``) at
    their tier (module docstring).

    Args:
        best, other: the two rows (same tier).
        info: the objective.
        paired: ``other`` is the baseline (the pre-rounds fallback uses the summary's
            paired speedup interval then; disjoint intervals otherwise).
        rounds: rounds.csv rows (None: a run without rounds.csv).
        design: the run's design (run.json ``design.name``).
        schedule: the run's looks (default: a fixed design).
        equivalence: the equivalence margin (``report.equivalence_margin``).
    """
    if rounds is not None and not rounds.empty:
        return _from_rounds(
            best, other, info, rounds, design, schedule or LookSchedule(), equivalence
        )
    ratio = _pooled(best, other, info)
    if paired:
        low, high = as_float(best["ratio_low"]), as_float(best["ratio_high"])
        if low is not None and high is not None:
            return Margin(
                str(other["variant"]),
                ratio,
                low,
                high,
                low > 1.0,
                f"95 % interval of the {info.interval_note}",
                decision=classify(low, high, equivalence),
                equivalence_margin=equivalence,
            )
    else:
        bounds = [
            as_float(best["value_low"]),
            as_float(best["value_high"]),
            as_float(other["value_low"]),
            as_float(other["value_high"]),
        ]
        if all(b is not None for b in bounds):
            lo_a, hi_a, lo_b, hi_b = (float(b or 0.0) for b in bounds)
            apart = lo_a > hi_b if info.higher_is_better else hi_a < lo_b
            low = lo_a / hi_b if info.higher_is_better else lo_b / hi_a
            high = hi_a / lo_b if info.higher_is_better else hi_b / lo_a
            return Margin(
                str(other["variant"]),
                ratio,
                low,
                high,
                apart,
                "disjoint 95 % intervals" if apart else "overlapping 95 % intervals",
                equivalence_margin=equivalence,
            )
    return Margin(
        str(other["variant"]), ratio, None, None, None, _no_interval_basis(best, info)
    )

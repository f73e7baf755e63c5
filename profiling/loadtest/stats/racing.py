"""Rounds by need (``loadtest.rounds: auto``): after each look, which variant is still worth
measuring at which tier (pure: per-round figures in, the next round's variants out).

A race (Maron & Moore 1994, Hoeffding races; Birattari et al. 2002, F-Race) drops the
candidates that are clearly out and spends the remaining rounds on the close ones. At one
tier, after each look (every 3 rounds, ``stats/decisions.py``):

* the **leader** is the still-measured variant with the best geometric mean of its per-round
  figure (every still-measured variant has been measured in the same rounds: one never
  re-enters);
* the **comparisons** the answer rests on are the leader over every other variant
  (the baseline included), each decided from its paired round ratios by
  :func:`~trtbench.profiling.loadtest.stats.decisions.decide_pair` at the run's look schedule
  (better / worse / equivalent / open);
* a variant the leader is decided **better** than stops being measured at the tier (it keeps
  its rounds so far in every table);
* the tier is **settled** when no comparison of the leader with a still-measured variant is
  open; then nothing more is measured there.

The run stops when every tier is settled or the budget (``loadtest.budget``) is spent; the
cells of the next round keep their shuffled, side-by-side order
(:func:`~trtbench.profiling.loadtest.workload.design.plan_cells`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from trtbench.profiling.loadtest.stats.decisions import (
    BETTER,
    OPEN,
    LookSchedule,
    PairDecision,
    decide_pair,
)

RoundValues = Mapping[int, float]
"""Round → a variant's figure at one tier in that round (positive; absent: not measured)."""


@dataclass(frozen=True)
class Comparison:
    """The leader ``a`` over ``b`` at one tier, decided."""

    a: str
    b: str
    decision: PairDecision


@dataclass(frozen=True)
class TierRace:
    """One tier after a round.

    Attributes:
        tier: its label.
        leader: the best still-measured variant.
        comparisons: the leader over every other variant measured there.
        active: the variants still measured (spec order); empty: settled.
    """

    tier: str
    leader: str
    comparisons: tuple[Comparison, ...]
    active: tuple[str, ...]

    @property
    def settled(self) -> bool:
        return not self.active


def _geo_mean(values: RoundValues) -> float:
    v = np.array([x for x in values.values() if x > 0], dtype=float)
    return float(np.exp(np.log(v).mean())) if v.size else math.nan


def _paired(
    a: RoundValues, b: RoundValues, higher_is_better: bool
) -> tuple[list[float], list[int]]:
    both = [r for r in sorted(set(a) & set(b)) if a[r] > 0 and b[r] > 0]
    ratios = [a[r] / b[r] if higher_is_better else b[r] / a[r] for r in both]
    return ratios, both


def race_tier(
    tier: str,
    figures: Mapping[str, RoundValues],
    active: Sequence[str],
    schedule: LookSchedule,
    margin: float,
    higher_is_better: bool = True,
) -> TierRace:
    """Where the race at ``tier`` stands after a round (module docstring).

    Args:
        tier: the tier label.
        figures: variant → its figure per round at this tier (every variant measured there).
        active: the variants measured in the round just run, in spec order.
        schedule: the run's looks (the levels of the intervals).
        margin: the equivalence margin (0.05: ±5 %).
        higher_is_better: the figure's orientation (output tok/s: True).

    Returns:
        The tier's race; ``active`` of the next round (empty when settled).

    Raises:
        ValueError: ``active`` is empty or names a variant without figures.
    """
    if not active or any(v not in figures for v in active):
        raise ValueError(f"tier {tier}: active variants {list(active)} lack figures")
    sign = 1.0 if higher_is_better else -1.0
    means = {v: _geo_mean(figures[v]) for v in active}
    ranked = [v for v in active if not math.isnan(means[v])]
    leader = max(ranked, key=lambda v: sign * means[v]) if ranked else active[0]
    comparisons = []
    for other in figures:
        if other != leader:
            ratios, rounds = _paired(figures[leader], figures[other], higher_is_better)
            decision = decide_pair(ratios, schedule, margin, rounds)
            comparisons.append(Comparison(leader, other, decision))
    out = {c.b for c in comparisons if c.decision.decision == BETTER}
    still = [v for v in active if v not in out]
    is_open = any(c.decision.decision == OPEN for c in comparisons if c.b in still)
    return TierRace(tier, leader, tuple(comparisons), tuple(still) if is_open else ())


def resolvable_ratio(log_sd: float, schedule: LookSchedule, rounds: int) -> float:
    """The smallest ratio (> 1) a comparison of round-to-round spread ``log_sd`` (the SD of
    its log ratios) would tell from 1 at ``rounds`` paired rounds: ``exp(t · s / √n)``
    with ``t`` the Student-t quantile at the schedule's level for ``n`` rounds.

    Returns:
        The ratio; ``inf`` below 3 rounds or without a spread.
    """
    if rounds < 3 or not math.isfinite(log_sd) or log_sd < 0:
        return math.inf
    q = stats.t.ppf(1.0 - schedule.alpha_at(rounds) / 2.0, rounds - 1)
    return float(math.exp(q * log_sd / math.sqrt(rounds)))


def budget_resolution(
    figures: Mapping[str, RoundValues],
    leader: str,
    schedule: LookSchedule,
    higher_is_better: bool = True,
    rounds: int | None = None,
) -> dict[str, float]:
    """What the whole budget can resolve at one tier, from the spread so far: for each
    other variant, :func:`resolvable_ratio` at ``rounds`` (default ``schedule.max_rounds``)
    rounds with the SD of its log ratios to ``leader`` over the rounds measured (3 or more
    pairs; others left out). The figure assumes the spread stays as it was: a guide, not a
    bound.

    Returns:
        variant → the smallest ratio (> 1) the budget would tell from 1.
    """
    most = rounds or schedule.max_rounds
    if most is None or leader not in figures:
        return {}
    out = {}
    for other, values in figures.items():
        ratios, _ = _paired(figures[leader], values, higher_is_better)
        if other == leader or len(ratios) < 3:
            continue
        sd = float(np.std(np.log(ratios), ddof=1))
        out[other] = resolvable_ratio(sd, schedule, most)
    return out

"""Paired ratios between two variants over the rounds of a run (pure: rounds.csv rows in,
typed records out).

Round r of variant A is compared with round r of variant B at the same tier: the two cells
were measured in the same round (side by side in time in the ``interleaved`` design), so what
changed on the host between rounds lands on both sides and cancels in their ratio; what
changed between the two cells of one round is in the ratio's spread, hence in its interval.

Definitions (per tier, over the rounds where both cells have a positive figure):

* ratio of round r: ``A_r / B_r`` for a higher-better figure (output tok/s, goodput),
  ``B_r / A_r`` for a lower-better one (TPOT): > 1 means A is better.
* estimate: the geometric mean of the round ratios; interval: the 95 % Student-t interval of
  their logarithms, mapped back (``profiling/loadtest/workload/repeats.py`` ``log_t_interval``; the
  paired t-interval on the log scale, e.g. NIST/SEMATECH e-Handbook §7.3.1).
* significant: the interval lies wholly above 1 (A better) — with 2.5 % false positives per
  direction when the two are identical and the rounds' ratios are independent and log-normal
  (the A/A check in ``docs/aa_check.md`` measures the rate on real runs).
* decision: better / worse / equivalent / open
  (:mod:`trtbench.profiling.loadtest.stats.decisions`). A run that stopped measuring when its
  comparisons were decided (``loadtest.rounds: auto``) states every interval at the level its
  look schedule gives that many pairs, so that it keeps 95 % coverage under stopping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from trtbench.profiling.loadtest.stats.decisions import (
    DEFAULT_EQUIVALENCE_MARGIN,
    OPEN,
    LookSchedule,
    decide_pair,
)
from trtbench.profiling.loadtest.workload.repeats import MIN_ROUNDS as MIN_ROUNDS


@dataclass(frozen=True)
class PairedRatio:
    """A over B at one tier, paired by round (module docstring).

    Attributes:
        a, b, tier: the two variants and the tier.
        ratio: geometric mean of the round ratios (> 1: A better); NaN without a pair.
        low, high: its interval (None with fewer than :data:`MIN_ROUNDS` pairs).
        rounds: the pairs it rests on.
        level: the interval's confidence level (95 %, or above under a look schedule).
        decision: better / worse / equivalent / open (module docstring).
    """

    a: str
    b: str
    tier: str
    ratio: float
    low: float | None
    high: float | None
    rounds: int
    level: float = 0.95
    decision: str = OPEN

    @property
    def significant(self) -> bool | None:
        """A is significantly better (``low > 1``); None without an interval."""
        return None if self.low is None else self.low > 1.0

    @property
    def worse(self) -> bool | None:
        """A is significantly worse (``high < 1``); None without an interval."""
        return None if self.high is None else self.high < 1.0


def round_values(
    rounds: pd.DataFrame, variant: str, tier: str, column: str
) -> pd.Series:
    """``variant``'s figure ``column`` at ``tier``, indexed by round (positive values only)."""
    mine = rounds[
        (rounds["variant"].astype(str) == variant)
        & (rounds["tier"].astype(str) == tier)
    ]
    if mine.empty or column not in mine:
        return pd.Series(dtype=float)
    values = pd.to_numeric(mine[column], errors="coerce").astype(float)
    values.index = mine["round"].astype(int).to_numpy()
    return values[values > 0].groupby(level=0).last()


def paired_ratio(
    rounds: pd.DataFrame,
    a: str,
    b: str,
    tier: str,
    column: str,
    higher_is_better: bool = True,
    schedule: LookSchedule | None = None,
    margin: float = DEFAULT_EQUIVALENCE_MARGIN,
) -> PairedRatio:
    """A over B at ``tier`` by ``column`` of rounds.csv, paired by round (module docstring).

    Args:
        rounds: rounds.csv rows (``variant``, ``tier``, ``round`` and the figure).
        a, b: the variants (A is the one whose advantage the ratio states).
        tier: the tier label.
        column: a rounds.csv figure, e.g. ``output_tokens_per_s`` or ``tpot_p50_ms``.
        higher_is_better: orientation of the figure.
        schedule: the run's look schedule (default: a fixed design, 95 %).
        margin: the equivalence margin (``report.equivalence_margin``).
    """
    va, vb = (
        round_values(rounds, a, tier, column),
        round_values(rounds, b, tier, column),
    )
    both = va.index.intersection(vb.index)
    if not len(both):
        return PairedRatio(a, b, tier, math.nan, None, None, 0)
    top, bottom = (va[both], vb[both]) if higher_is_better else (vb[both], va[both])
    d = decide_pair(
        (top / bottom).to_numpy(dtype=float),
        schedule or LookSchedule(),
        margin,
        [int(r) for r in both],
    )
    return PairedRatio(
        a, b, tier, d.ratio, d.low, d.high, d.rounds, d.level, d.decision
    )

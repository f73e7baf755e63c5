"""Which variants a race keeps measuring at a tier, on hand-made per-round figures.

Figures are built as exact multiples of a baseline so that the paired round ratios (and so
the decisions) are known by hand: a constant ratio has no spread, its interval is the point.
"""

from __future__ import annotations

import math

import pytest

from trtbench.profiling.loadtest.stats.decisions import (
    BETTER,
    EQUIVALENT,
    OPEN,
    LookSchedule,
)
from trtbench.profiling.loadtest.stats.racing import race_tier, resolvable_ratio

BASE = {0: 100.0, 1: 90.0, 2: 110.0}
SCHEDULE = LookSchedule(max_rounds=8)


def times(k: float | list[float], base=BASE) -> dict[int, float]:
    ks = k if isinstance(k, list) else [k] * len(base)
    return {r: v * f for (r, v), f in zip(base.items(), ks, strict=True)}


def decisions(race) -> dict[str, str]:
    return {c.b: c.decision.decision for c in race.comparisons}


def test_clear_winners_settle_the_tier_after_three_rounds():
    figs = {"base": BASE, "a": times(1.5), "b": times(1.2)}
    race = race_tier("c4", figs, ["base", "a", "b"], SCHEDULE, 0.05)
    assert race.leader == "a"
    # a/base = 1.5 and a/b = 1.25 in every round: both decided, nothing left to measure.
    assert decisions(race) == {"base": BETTER, "b": BETTER}
    assert race.settled and race.active == ()


def test_a_close_race_keeps_its_two_and_drops_the_clear_loser():
    # a/b ratios 1.0214, 0.99, 1.01: open (log SD 0.016, the look at 3 of 8 rounds
    # gives ±11 %); a over base: 1.43, 1.386, 1.414, decided better at the same width.
    figs = {"base": BASE, "a": times([1.43, 1.386, 1.414]), "b": times(1.4)}
    race = race_tier("c4", figs, ["base", "a", "b"], SCHEDULE, 0.05)
    assert race.leader == "a"  # geometric mean of a's figures is the highest
    assert decisions(race) == {"base": BETTER, "b": OPEN}
    assert race.active == ("a", "b")


def test_before_three_rounds_nothing_is_dropped():
    figs = {
        v: {r: x for r, x in f.items() if r < 2}
        for v, f in {"base": BASE, "a": times(1.5), "b": times(1.2)}.items()
    }
    race = race_tier("c1", figs, ["base", "a", "b"], SCHEDULE, 0.05)
    assert set(decisions(race).values()) == {OPEN}
    assert race.active == ("base", "a", "b")


def test_twins_within_the_margin_are_equivalent_and_settle():
    # a/b ratios 1.01, 0.99, 1.00: interval well inside ±5 % at every look.
    figs = {"base": BASE, "a": times([2.02, 1.98, 2.0]), "b": times(2.0)}
    race = race_tier("c8", figs, ["base", "a", "b"], LookSchedule(max_rounds=3), 0.05)
    assert decisions(race)["b" if race.leader == "a" else "a"] == EQUIVALENT
    assert race.settled


def test_a_dropped_variant_is_still_compared_but_not_measured_again():
    # base was dropped after round 2; a and b go on (rounds 0-3).
    figs = {
        "base": BASE,
        "a": times([1.43, 1.386, 1.414, 1.5], {**BASE, 3: 100.0}),
        "b": times(1.4, {**BASE, 3: 100.0}),
    }
    race = race_tier("c4", figs, ["a", "b"], SCHEDULE, 0.05)
    assert decisions(race)["base"] == BETTER  # from the three paired rounds
    assert "base" not in race.active


def test_a_lower_is_better_figure_picks_the_smallest():
    figs = {"base": BASE, "fast": times(0.5)}
    race = race_tier("c1", figs, ["base", "fast"], SCHEDULE, 0.05, False)
    assert race.leader == "fast" and decisions(race) == {"base": BETTER}


def test_an_active_variant_without_figures_is_refused():
    with pytest.raises(ValueError, match="lack figures"):
        race_tier("c1", {"base": BASE}, ["base", "x"], SCHEDULE, 0.05)


def test_what_a_budget_can_resolve():
    # SD 0.1 of log ratios, fixed design, 4 rounds: exp(t(0.975, 3) · 0.1 / 2).
    from scipy import stats

    want = math.exp(stats.t.ppf(0.975, 3) * 0.1 / 2)
    assert resolvable_ratio(0.1, LookSchedule(), 4) == pytest.approx(want)
    assert resolvable_ratio(0.1, LookSchedule(), 2) == math.inf


def test_what_the_budget_resolves_from_the_first_rounds_spread():
    from scipy import stats as st

    from trtbench.profiling.loadtest.stats.racing import budget_resolution

    # a over base: ratios 1.1, 1.0, 1.2 in rounds 0..2; b equals base (no spread)
    figs = {"base": BASE, "a": times([1.1, 1.0, 1.2]), "b": times(1.0)}
    got = budget_resolution(figs, "a", SCHEDULE)
    logs = [math.log(1.1), 0.0, math.log(1.2)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    # the last look of 8 (looks at 3, 6, 8): alpha 0.05 * (1 - (6/8)^2) = 0.021875, 7 df
    q = st.t.ppf(1 - 0.021875 / 2, 7)
    assert got["base"] == pytest.approx(math.exp(q * sd / math.sqrt(8)), rel=1e-12)
    assert got["b"] == pytest.approx(got["base"], rel=1e-12)  # same ratios to a
    assert "a" not in got
    assert budget_resolution(figs, "a", LookSchedule()) == {}  # a fixed design: none

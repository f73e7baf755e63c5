"""Decisions of a paired comparison and the levels of its looks, on hand-worked cases.

Expected levels come from the spending function written out by hand (α · (n/N)² steps);
expected intervals from the Student-t formula with scipy's quantile (an independent
implementation of the t distribution, not the code under test).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from trtbench.profiling.loadtest.stats.decisions import (
    BETTER,
    EQUIVALENT,
    OPEN,
    WORSE,
    LookSchedule,
    classify,
    decide_pair,
    next_look_fits,
    planned_rounds,
    resolution_text,
)


def test_a_fixed_design_looks_once_at_95_percent():
    s = LookSchedule()
    assert not s.sequential
    assert s.alpha_at(2) == 0.0  # two rounds decide nothing
    assert s.alpha_at(3) == pytest.approx(0.05)
    assert s.level_at(12) == pytest.approx(0.95)


def test_the_looks_spend_five_percent_in_all():
    # N = 4: α_3 = 0.05 · (3/4)² = 0.028125, α_4 = 0.05 · (1 − 9/16) = 0.021875.
    s = LookSchedule(max_rounds=4)
    assert s.alpha_at(3) == pytest.approx(0.028125)
    assert s.alpha_at(4) == pytest.approx(0.021875)
    # N = 12: looks after rounds 3, 6, 9 and 12, together spending exactly α.
    s12 = LookSchedule(max_rounds=12)
    assert s12.looks() == (3, 6, 9, 12)
    assert sum(s12.alpha_at(n) for n in s12.looks()) == pytest.approx(0.05)
    # α_12 = 0.05 · (1 − (9/12)²) = 0.05 · 7/16; α_6 = 0.05 · ((6/12)² − (3/12)²) = 0.05 · 3/16
    assert s12.alpha_at(12) == pytest.approx(0.05 * 7 / 16)
    assert s12.alpha_at(6) == pytest.approx(0.05 * 3 / 16)
    # a stop between looks states its interval at the next look's level
    assert s12.alpha_at(7) == s12.alpha_at(8) == s12.alpha_at(9)
    assert not s12.is_look(7) and s12.is_look(9)
    # a budget that is not a multiple of 3 looks at its end too: 3, 6, 8
    s8 = LookSchedule(max_rounds=8)
    assert s8.looks() == (3, 6, 8)
    assert s8.alpha_at(8) == pytest.approx(0.05 * (64 - 36) / 64)


def test_looks_made_at_fractions_of_a_time_budget_spend_their_shares():
    # looks made after 3, 6, 9 rounds at t = 0.3, 0.5, 0.8 of the budget, the last at 11
    # (t = 1): half of α spread as ½ α (t² − t_prev²) over the looks before the last, which
    # spends the rest; 5 % in all
    s = LookSchedule(36, made=((3, 0.3), (6, 0.5), (9, 0.8), (11, 1.0)))
    assert s.alpha_at(3) == pytest.approx(0.025 * 0.09)
    assert s.alpha_at(6) == pytest.approx(0.025 * (0.25 - 0.09))
    assert s.alpha_at(5) == s.alpha_at(6)  # a pair with fewer rounds: the look's at 6
    assert s.alpha_at(11) == pytest.approx(0.05 - 0.025 * 0.64)
    assert sum(s.alpha_at(n) for n, _ in s.made) == pytest.approx(0.05)
    # stopped by a signal after 7 rounds, no look since 6: the rest, 0.05 − 0.025 · 0.25
    cut = LookSchedule(36, made=((3, 0.3), (6, 0.5)))
    assert cut.alpha_at(7) == pytest.approx(0.05 - 0.025 * 0.25)
    assert cut.looked(9, 0.8123456789).made[-1] == (9, 0.812346)
    with pytest.raises(ValueError, match="fractions rising"):
        LookSchedule(36, made=((3, 0.5), (6, 0.4)))


def test_the_rounds_a_time_budget_holds_rounded_up_to_a_look():
    # 3 rounds in 36 s (12 s each), 150 s: 12.5 rounds fit; rounded up to a look: 15
    assert planned_rounds(36.0, 3, 150.0, 36) == 15
    assert planned_rounds(36.0, 3, 144.0, 36) == 12  # exactly 12 fit: 12, not 15
    assert planned_rounds(36.0, 3, 150.0, 12) == 12  # never past max_rounds
    assert (
        planned_rounds(36.0, 3, 150.0, 14) == 14
    )  # a budget not on a look: its own end
    assert planned_rounds(100.0, 3, 150.0, 36) == 6  # 4.5 fit
    assert planned_rounds(1000.0, 3, 150.0, 36) == 3  # the first look is the last
    with pytest.raises(ValueError, match="rounds_run"):
        planned_rounds(0.0, 3, 150.0, 36)


def test_a_budget_below_three_rounds_is_refused():
    with pytest.raises(ValueError, match="at least 3"):
        LookSchedule(max_rounds=2)


@pytest.mark.parametrize(
    "low, high, want",
    [
        (1.01, 1.20, BETTER),
        (0.80, 0.99, WORSE),
        (0.97, 1.04, EQUIVALENT),  # inside [1/1.05 = 0.952, 1.05]
        (0.94, 1.02, OPEN),  # 0.94 < 0.952: a 6 % loss is not excluded
        (0.98, 1.06, OPEN),
        (None, None, OPEN),
        (1.01, 1.03, BETTER),  # significant, even if small
    ],
)
def test_classes(low, high, want):
    assert classify(low, high, 0.05) == want


def test_the_interval_of_a_look_is_the_t_interval_at_its_level():
    # log ratios 0.0, 0.1, 0.2: mean 0.1, sample SD 0.1, n = 3.
    ratios = np.exp([0.0, 0.1, 0.2])
    fixed = decide_pair(ratios, LookSchedule())
    half = stats.t.ppf(0.975, 2) * 0.1 / math.sqrt(3)  # 4.3027 · 0.0577 = 0.2484
    assert fixed.ratio == pytest.approx(math.exp(0.1))
    assert fixed.low == pytest.approx(math.exp(0.1 - half))
    assert fixed.high == pytest.approx(math.exp(0.1 + half))
    assert fixed.level == pytest.approx(0.95) and fixed.decision == OPEN
    looked = decide_pair(ratios, LookSchedule(max_rounds=4))
    half4 = stats.t.ppf(1 - 0.028125 / 2, 2) * 0.1 / math.sqrt(3)
    assert looked.level == pytest.approx(1 - 0.028125)
    assert looked.low == pytest.approx(math.exp(0.1 - half4))
    assert looked.high == pytest.approx(math.exp(0.1 + half4))
    assert looked.high - looked.low > fixed.high - fixed.low  # a look costs width


def test_two_pairs_decide_nothing_and_identical_rounds_decide_at_three():
    two = decide_pair([1.3, 1.3], LookSchedule(max_rounds=12))
    assert two.low is None and two.decision == OPEN and two.rounds == 2
    same = decide_pair([1.3, 1.3, 1.3], LookSchedule(max_rounds=12))
    assert same.low == pytest.approx(1.3) and same.decision == BETTER


def test_resolution_names_the_interval():
    assert resolution_text(0.93, 1.102) == (
        "a difference between -7.0 % and +10.2 % could not be told apart"
    )
    assert "fewer than 3 paired rounds" in resolution_text(None, None)


def _race_pair(log_ratios: np.ndarray, schedule: LookSchedule) -> str:
    """The class a race states for one pair: decided at the first look that decides, else
    what the last look says (the budget spent)."""
    got = OPEN
    for n in schedule.looks():
        got = decide_pair(np.exp(log_ratios[:n]), schedule).decision
        if got != OPEN:
            break
    return got


def test_stopping_at_the_first_decided_look_keeps_the_error_rate_below_five_percent():
    # Twins (true ratio 1) with Gaussian round noise, SD 0.1 of the log ratio, budget 12:
    # the share called better or worse is at most α = 5 % whatever the run's stopping (the
    # union bound); checked on 2000 simulated runs (seeded; binomial SD at 5 %: 0.49 %).
    rng = np.random.default_rng(7)
    schedule = LookSchedule(max_rounds=12)
    calls = [_race_pair(rng.normal(0.0, 0.1, 12), schedule) for _ in range(2000)]
    wrong = sum(c in (BETTER, WORSE) for c in calls) / len(calls)
    assert wrong <= 0.06  # 3.4 % with this seed
    # the same noise looked at after every round with plain 95 % intervals (no spending)
    # calls twins different far more often: the reason the looks spend α
    naive = 0
    for _ in range(2000):
        v = rng.normal(0.0, 0.1, 12)
        for n in range(3, 13):
            low = decide_pair(np.exp(v[:n]), LookSchedule()).decision
            if low in (BETTER, WORSE):
                naive += 1
                break
    assert naive / 2000 > 0.10  # 19.8 % with this seed


def test_looks_at_shares_of_a_time_budget_keep_the_error_rate_below_five_percent():
    # The same twins, looks made at a time budget's shares (0.3, 0.5, 0.7, 0.85, then the
    # last at 15 rounds): stopping at the first decided look calls them different in at most
    # α = 5 % of 2000 simulated runs, and a 10 % loss is called worse in most.
    rng = np.random.default_rng(11)
    made = ((3, 0.3), (6, 0.5), (9, 0.7), (12, 0.85), (15, 1.0))

    def race(v: np.ndarray) -> str:
        got = OPEN
        for k, (n, _) in enumerate(made):
            got = decide_pair(
                np.exp(v[:n]), LookSchedule(36, made=made[: k + 1])
            ).decision
            if got != OPEN:
                break
        return got

    twins = [race(rng.normal(0.0, 0.1, 15)) for _ in range(2000)]
    wrong = sum(c in (BETTER, WORSE) for c in twins) / 2000
    assert wrong <= 0.06  # 4.2 % with this seed
    loss = [race(rng.normal(math.log(0.9), 0.1, 15)) for _ in range(2000)]
    assert sum(c == WORSE for c in loss) / 2000 > 0.8  # 94.5 % with this seed


def test_the_instance_term_is_added_to_the_rounds_spread():
    # logs 0, 0.1, 0.2 on one server instance, tau = 0.05, 95 %: by hand
    # s^2/n = 0.01/3, tau^2 * (3/3)^2 = 0.0025, V = 0.0058333;
    # Satterthwaite: nu = V^2 / ((s^2/n)^2 / 2) = 6.125.
    s = LookSchedule(instance_sd=0.05)
    d = decide_pair(np.exp([0.0, 0.1, 0.2]), s)
    v = 0.01 / 3 + 0.0025
    half = stats.t.ppf(0.975, 6.125) * math.sqrt(v)
    assert d.low == pytest.approx(math.exp(0.1 - half))
    assert d.high == pytest.approx(math.exp(0.1 + half))
    assert d.decision == OPEN  # [0.83, 1.33]: an instance alone could make 10 %


def test_fresh_instances_shrink_the_term_by_their_share_of_rounds():
    # rounds 0..5, fresh servers every 3: two instances of 3 rounds, sum (n_b/n)^2 = 1/2.
    logs = np.array([0.0, 0.02, 0.04, 0.01, 0.03, 0.05])
    s = LookSchedule(instance_sd=0.04, restart_every=3)
    d = decide_pair(np.exp(logs), s, rounds=list(range(6)))
    within = logs.var(ddof=1) / 6
    v = within + 0.04**2 * 0.5
    half = stats.t.ppf(0.975, v**2 / (within**2 / 5)) * math.sqrt(v)
    assert d.high == pytest.approx(math.exp(logs.mean() + half))
    # the same rounds on one instance: wider
    one = decide_pair(
        np.exp(logs), LookSchedule(instance_sd=0.04), rounds=list(range(6))
    )
    assert one.high > d.high
    assert s.instance_of(5) == 1 and LookSchedule().instance_of(5) == 0


def test_identical_rounds_with_an_instance_term_use_the_normal_quantile():
    d = decide_pair([1.0, 1.0, 1.0], LookSchedule(instance_sd=0.02))
    assert d.high == pytest.approx(math.exp(stats.norm.ppf(0.975) * 0.02))
    assert d.decision == EQUIVALENT  # +-3.9 % within the 5 % margin


def test_twins_on_two_servers_keep_coverage_only_with_the_instance_term():
    # Simulated twin pairs: each pair's servers differ by d ~ N(0, tau) for the whole run
    # (tau = 0.036, docs/aa_check.md), rounds add N(0, 0.08); 12 rounds, fixed design.
    rng = np.random.default_rng(7)
    tau, sd, n, runs = 0.036, 0.08, 12, 3000
    miss_plain = miss_term = 0
    with_term, plain = LookSchedule(instance_sd=tau), LookSchedule()
    for _ in range(runs):
        logs = rng.normal(rng.normal(0.0, tau), sd, n)
        a, b = decide_pair(np.exp(logs), plain), decide_pair(np.exp(logs), with_term)
        miss_plain += not a.low <= 1.0 <= a.high
        miss_term += not b.low <= 1.0 <= b.high
    assert miss_plain / runs > 0.10  # what docs/aa_check.md saw: twins called different
    se = math.sqrt(0.05 * 0.95 / runs)  # the simulation's own error
    assert miss_term / runs <= 0.05 + 3 * se  # 95 % up to Satterthwaite's approximation


def test_recorded_schedule_reads_the_instance_term():
    from trtbench.profiling.loadtest.stats.decisions import recorded_schedule

    design = {
        "stopping": {"max_rounds": 12},
        "instance": {"sd": 0.03, "restart_every": 3},
    }
    s = recorded_schedule(design)
    assert (s.max_rounds, s.instance_sd, s.restart_every) == (12, 0.03, 3)
    old = recorded_schedule({"stopping": {"max_rounds": 12}})  # before the term
    assert (old.instance_sd, old.restart_every) == (0.0, None)
    bad = recorded_schedule({"instance": {"sd": "x", "restart_every": True}})
    assert (bad.max_rounds, bad.instance_sd, bad.restart_every) == (None, 0.0, None)


def test_recorded_schedule_reads_the_looks_made():
    from trtbench.profiling.loadtest.stats.decisions import recorded_schedule

    stopping = {"max_rounds": 36, "looks": [[3, 0.24], [6, 0.48], [9, 1.0]]}
    s = recorded_schedule({"stopping": stopping})
    assert s.made == ((3, 0.24), (6, 0.48), (9, 1.0))
    assert s.alpha_at(9) == pytest.approx(0.05 - 0.025 * 0.48**2)
    # not a record of looks (a string, a fraction past 1, falling, a bool): α over 36
    for looks in ("x", [[3, 1.5]], [[3, 0.5], [6, 0.4]], [[True, 0.5]], [[3]]):
        s = recorded_schedule({"stopping": {"max_rounds": 36, "looks": looks}})
        assert s.made == () and s.alpha_at(3) == pytest.approx(0.05 / 144)


def test_the_next_look_fits_at_the_pace_since_the_last():
    # 12 s a round, a 150 s budget: after 9 rounds (108 s) the look at 12 ends at 144 s,
    # inside; after 12 (144 s) the look at 15 would end at 180 s, outside
    assert next_look_fits(9, 108.0, (6, 72.0), 12, 150.0)
    assert not next_look_fits(12, 144.0, (9, 108.0), 15, 150.0)
    # the pace is the last block's, not the run's: a slow first block does not count
    assert next_look_fits(6, 60.0, (3, 54.0), 9, 70.0)  # 2 s a round since: 66 s

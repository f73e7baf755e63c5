"""A race handed out round by round (``loadtest.rounds: auto``): which cells, when it stops,
and what run.json is told. Figures are exact multiples of a baseline figure, so every
decision is known by hand (a constant ratio has no spread); the order of a round is
compared with the fixed design's round (``plan_cells``), which it must equal."""

from __future__ import annotations

import pytest

from trtbench.profiling.loadtest.driver.round_plans import (
    MAX_ROUNDS,
    SETTLED,
    FixedPlan,
    InstanceBlocks,
    RacePlan,
    RoundByRound,
)
from trtbench.profiling.loadtest.stats.decisions import LookSchedule
from trtbench.profiling.loadtest.workload.design import INTERLEAVED, plan_cells
from trtbench.profiling.loadtest.workload.schedule import Tier

TIERS = [Tier(concurrency=1), Tier(concurrency=4)]
VARIANTS = ["base", "a", "b"]
BASE = [100.0, 90.0, 110.0, 105.0, 95.0, 100.0]


def drive(plan, factor):
    """Run ``plan`` to its end; a cell's figure is ``BASE[round] · factor(variant, tier,
    round)``. Returns the rounds handed out, as lists of (variant, tier)."""
    rounds = []
    while batch := plan.next_round():
        rounds.append([(c.variant, c.tier.label) for c in batch])
        for c in batch:
            plan.cell_done(c, BASE[c.round] * factor(c.variant, c.tier.label, c.round))
    return rounds


def test_clear_differences_settle_after_three_rounds():
    seen = []
    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(6), 0.05, on_round=seen.append)
    rounds = drive(plan, lambda v, t, r: {"base": 1.0, "a": 1.5, "b": 1.2}[v])
    assert [len(r) for r in rounds] == [6, 6, 6]  # nothing decided before 3 rounds
    assert plan.stopped_because == SETTLED and plan.rounds_run == 3
    assert plan.races["c4"].leader == "a"
    # run.json is told after each round and once at the end
    assert len(seen) == 4
    assert plan.as_json()["tiers"]["c1"]["decisions"] == {
        "base": "better",
        "b": "better",
    }


def test_each_round_keeps_the_fixed_design_order():
    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(6), 0.05)
    drive(plan, lambda v, t, r: 1.0)
    fixed = plan_cells(INTERLEAVED, VARIANTS, TIERS, 3, 7)
    assert [(c.round, c.tier.label, c.variant) for c in plan.cells[:18]] == [
        (c.round, c.tier.label, c.variant) for c in fixed
    ]
    assert [c.position for c in plan.cells] == list(range(len(plan.cells)))


def test_a_close_pair_is_measured_on_alone_until_the_budget():
    # at c4, a and b alternate ±2 %: open at every look; base is far behind everywhere;
    # at c1 a is 1.5 × b: settled after round 3.
    def factor(v, t, r):
        if v == "base":
            return 1.0
        if t == "c1":
            return 1.5 if v == "a" else 1.0 * 1.2
        return 1.4 * (1.02 if (v == "a") == (r % 2 == 0) else 0.98)

    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(5), 0.05)
    rounds = drive(plan, factor)
    assert plan.stopped_because == MAX_ROUNDS and plan.rounds_run == 5
    assert sorted(rounds[3]) == [("a", "c4"), ("b", "c4")]  # base out, c1 settled
    assert sorted(rounds[4]) == [("a", "c4"), ("b", "c4")]


def test_a_variant_whose_cell_gave_no_figure_leaves_the_race_there():
    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(4), 0.05)
    rounds = drive(plan, lambda v, t, r: 0.0 if v == "b" else 1.5 if v == "a" else 1.0)
    # b never has a figure (its server died, every request failed): it is not measured
    # again at either tier, and a and base are still decided (a: 1.5 x base every round)
    assert [len(r) for r in rounds] == [6, 4, 4]
    assert all(v != "b" for r in rounds[1:] for v, _ in r)
    assert plan.stopped_because == SETTLED
    assert plan.as_json()["tiers"]["c1"]["decisions"] == {"base": "better"}


def test_a_fixed_plan_hands_over_its_cells_once():
    cells = plan_cells(INTERLEAVED, VARIANTS, TIERS, 2, 0)
    plan = FixedPlan(cells)
    assert list(plan.next_round()) == cells
    assert list(plan.next_round()) == []


def test_the_budget_s_resolution_is_told_once_from_the_first_look():
    # constant ratios: no spread, so the whole budget would resolve any difference (1.0)
    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(6), 0.05)
    assert plan.resolution == {}
    drive(plan, lambda v, t, r: {"base": 1.0, "a": 1.5, "b": 1.2}[v])
    assert plan.resolution == {
        "c1": {"base": 1.0, "b": 1.0},
        "c4": {"base": 1.0, "b": 1.0},
    }
    assert plan.as_json()["tiers"]["c4"]["budget_resolves"] == {"base": 1.0, "b": 1.0}


def test_a_spent_time_budget_still_lets_the_first_look_come():
    from trtbench.profiling.loadtest.driver.round_plans import MAX_MINUTES

    # a budget of no time at all, and a race that stays open (a and b alternate ±2 %):
    # three rounds run, so every comparison gets an interval, then the time stops it; its
    # first look is its last, spending the whole 5 %
    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(12), 0.05, max_minutes=1e-12)
    rounds = drive(
        plan,
        lambda v, t, r: (
            1.0 if v == "base" else (1.02 if (v == "a") == (r % 2 == 0) else 0.98)
        ),
    )
    assert len(rounds) == 3 and plan.stopped_because == MAX_MINUTES
    assert plan.as_json()["looks"] == [[3, 1.0]]  # the first look is the last
    assert plan.schedule.alpha_at(3) == pytest.approx(0.05)


def test_a_race_keeps_each_variant_to_its_own_tiers():
    # the follow-up's shape: "rec" at every tier, "a" only at c1, "b" only at c4
    plan = RacePlan(
        ["rec", "a", "b"],
        TIERS,
        7,
        LookSchedule(6),
        0.05,
        tiers_of_variant={"rec": ["c1", "c4"], "a": ["c1"], "b": ["c4"]},
    )
    rounds = drive(plan, lambda v, t, r: {"rec": 1.0, "a": 1.5, "b": 1.2}[v])
    assert sorted(rounds[0]) == [("a", "c1"), ("b", "c4"), ("rec", "c1"), ("rec", "c4")]
    assert plan.stopped_because == SETTLED and len(rounds) == 3
    assert plan.races["c1"].leader == "a" and plan.races["c4"].leader == "b"
    assert plan.as_json()["tiers"]["c4"]["decisions"] == {"rec": "better"}


def drive_blocks(blocks, factor):
    """Run :class:`InstanceBlocks` as the pipeline does: ask for a block, run it to its end
    (its servers would start between the two). Returns, per block, its variants and the
    rounds it measured."""
    out = []
    while blocks.start_block():
        variants = blocks.variants
        rounds = []
        while batch := blocks.next_round():
            rounds.append(batch[0].round)
            for c in batch:
                blocks.cell_done(
                    c, BASE[c.round] * factor(c.variant, c.tier.label, c.round)
                )
        out.append((variants, rounds))
    return out


def test_a_fixed_design_in_blocks_of_three_rounds():
    cells = plan_cells(INTERLEAVED, VARIANTS, TIERS, 5, 7)
    got = drive_blocks(InstanceBlocks(RoundByRound(cells), 3), lambda v, t, r: 1.0)
    assert [r for _, r in got] == [[0, 1, 2], [3, 4]]
    assert all(sorted(v) == sorted(VARIANTS) for v, _ in got)


def test_a_race_decides_before_the_next_block_starts_its_servers():
    # a and b clearly apart from base at every tier; a vs b alternate +-2 % (open):
    # after the first block (the look at 3) base is out everywhere, so the second block
    # starts only a's and b's servers; the budget (6) ends it, no third block starts. At
    # that last look (level 1 − 0.05 · (1 − ½ · ¼) = 95.6 %; log ratios ±0.04, 6 rounds)
    # a and b are within ±5 % of each other: equivalent, so the race ends settled.
    def factor(v, t, r):
        if v == "base":
            return 1.0
        return 1.4 * (1.02 if (v == "a") == (r % 2 == 0) else 0.98)

    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(6), 0.05)
    got = drive_blocks(InstanceBlocks(plan, 3), factor)
    assert [r for _, r in got] == [[0, 1, 2], [3, 4, 5]]
    assert sorted(got[0][0]) == ["a", "b", "base"] and sorted(got[1][0]) == ["a", "b"]
    assert plan.stopped_because == SETTLED
    assert plan.as_json()["tiers"]["c1"]["decisions"]["base"] == "better"
    assert "equivalent" in plan.as_json()["tiers"]["c1"]["decisions"].values()


def test_a_race_settled_at_the_first_look_starts_no_second_block():
    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(12), 0.05)
    got = drive_blocks(
        InstanceBlocks(plan, 3), lambda v, t, r: {"base": 1.0, "a": 1.5, "b": 1.2}[v]
    )
    assert [r for _, r in got] == [[0, 1, 2]] and plan.stopped_because == SETTLED


def test_a_time_budget_looks_at_the_share_of_minutes_used(monkeypatch):
    # A clock that moves 12 s per round; budget 150 s, 36 rounds; an open race (a and b
    # alternate ±10 %). Looks after 3, 6, 9 rounds at t = 36/150, 72/150, 108/150 (above
    # n/36); after 12 rounds (144 s) the next look would end at 180 s, past the budget: the
    # look at 12 is the last, t = 1, and spends the rest, 0.05 · (1 − ½ · 0.72²) (the looks
    # before it spend half of α by t²).
    from trtbench.profiling.loadtest.driver import round_plans

    clock = [0.0]
    monkeypatch.setattr(round_plans.time, "monotonic", lambda: clock[0])
    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(36), 0.05, max_minutes=2.5)
    rounds = []
    while batch := plan.next_round():
        rounds.append(batch)
        for c in batch:
            flip = (c.variant == "a") == (c.round % 2 == 0)
            f = 1.0 if c.variant == "base" else (1.1 if flip else 0.9)
            plan.cell_done(c, BASE[c.round % len(BASE)] * f)
        clock[0] += 12.0
    assert len(rounds) == 12 and plan.stopped_because == round_plans.MAX_MINUTES
    assert plan.as_json()["looks"] == [[3, 0.24], [6, 0.48], [9, 0.72], [12, 1.0]]
    assert plan.schedule.alpha_at(12) == pytest.approx(0.05 * (1 - 0.5 * 0.72**2))
    assert plan.schedule.alpha_at(9) == pytest.approx(0.025 * (0.72**2 - 0.48**2))
    # the budget's guide after the first look: 150 s hold 12.5 rounds at 12 s, so 15
    assert plan.expected_rounds == 15


def test_seconds_left_bounds_the_race_by_its_minutes_or_its_first_look(monkeypatch):
    # 12 s a round, as above. Budget 150 s: at round 2's start (12 s in) the minutes left,
    # 138 s, plus one round: 150 s; 6 s later 144 s; the race then ends after 12 rounds,
    # 144 s, inside both. Budget 6 s: the minutes cannot end the race before its first
    # look, so at round 2's start rounds 2 and 3 are left, 24 s; it ends at 36 s.
    from trtbench.profiling.loadtest.driver import round_plans

    def run(minutes: float) -> tuple[list, float, RacePlan]:
        clock = [0.0]
        monkeypatch.setattr(round_plans.time, "monotonic", lambda: clock[0])
        plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(36), 0.05, max_minutes=minutes)
        lefts = []
        while batch := plan.next_round():
            lefts.append(plan.seconds_left(clock[0]))
            if plan.rounds_run == 2:
                lefts.append(plan.seconds_left(clock[0] + 6.0))
            for c in batch:
                flip = (c.variant == "a") == (c.round % 2 == 0)
                f = 1.0 if c.variant == "base" else (1.1 if flip else 0.9)
                plan.cell_done(c, BASE[c.round % len(BASE)] * f)
            clock[0] += 12.0
        return lefts, clock[0], plan

    lefts, ended, plan = run(2.5)
    assert lefts[:3] == [None, 150.0, 144.0] and ended == 144.0
    assert all(left >= 144.0 - 12.0 * k for k, left in enumerate(lefts[3:], start=2))
    assert plan.seconds_left(ended) is None  # over
    lefts, ended, _ = run(0.1)
    assert lefts[:3] == [None, 24.0, 18.0] and ended == 36.0


def test_without_a_time_budget_the_looks_are_at_n_over_max_rounds():
    plan = RacePlan(VARIANTS, TIERS, 7, LookSchedule(6), 0.05)
    drive(plan, lambda v, t, r: 1.0 if v == "base" else (1.1 if r % 2 else 0.9))
    assert plan.stopped_because == MAX_ROUNDS
    assert plan.as_json()["looks"] == [[3, 0.5], [6, 1.0]]
    # half of α spread by t² over the looks before the last (0.025 · ½²), the rest last
    assert plan.schedule.alpha_at(3) == pytest.approx(0.025 * 0.25)
    assert plan.schedule.alpha_at(6) == pytest.approx(0.05 - 0.025 * 0.25)

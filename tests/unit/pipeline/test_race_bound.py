"""How many cells a race (``loadtest.rounds: auto``) can still measure, as the progress line
states it after every round: the cells handed out so far plus the last round's for every
round the budget has left, then exactly the cells measured once the race is over."""

from __future__ import annotations

from trtbench.pipeline.measuring import race_bound
from trtbench.profiling.loadtest.driver.round_plans import RacePlan
from trtbench.profiling.loadtest.stats.decisions import LookSchedule
from trtbench.profiling.loadtest.workload.schedule import Tier


def test_the_bound_shrinks_as_the_race_drops_cells_and_ends_exact():
    # 3 variants × 2 tiers, a budget of 5 rounds. At c1 a is 1.5 × the others: settled at
    # the first look (round 3); at c4 a and b alternate ±2 % and base is far behind: after
    # round 3 only a and b run on at c4 (2 cells a round) until the budget is spent.
    def figure(v, t, r):
        if v == "base":
            return 100.0
        if t == "c1":
            return 150.0 if v == "a" else 120.0
        return 140.0 * (1.02 if (v == "a") == (r % 2 == 0) else 0.98)

    bounds = []
    plan = RacePlan(
        ["base", "a", "b"],
        [Tier(concurrency=1), Tier(concurrency=4)],
        7,
        LookSchedule(5),
        0.05,
        on_round=lambda p: bounds.append(race_bound(p)),
    )
    while batch := plan.next_round():
        for c in batch:
            plan.cell_done(c, figure(c.variant, c.tier.label, c.round))
    assert bounds == [
        (6 + 4 * 6, True),  # round 1 handed out: 6 cells, 4 rounds of 6 at most left
        (12 + 3 * 6, True),
        (18 + 2 * 6, True),
        (20 + 1 * 2, True),  # round 4: 2 cells, so at most 2 more in round 5
        (22 + 0 * 2, True),
        (22, False),  # the budget is spent: 22 cells, exactly
    ]

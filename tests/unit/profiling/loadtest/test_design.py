"""The measurement design of a run (``profiling/loadtest/workload/design.py``): which (variant, tier)
cell is measured when.

Every property asserted here is read off the module docstring: each cell once per round,
positions 0..n-1; ``interleaved`` keeps the variants of one tier back to back and shuffles
tiers and variants afresh each round; ``rounds`` serves one variant at a time within a round;
``sequential`` runs each variant's passes in a row in spec order, in the pass order of
``repeats.tier_passes`` (pass 0 in the given tier order).
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import groupby, product

import pytest

from trtbench.profiling.loadtest.workload.design import (
    DESIGNS,
    INTERLEAVED,
    ROUNDS,
    SEQUENTIAL,
    Cell,
    order_json,
    plan_cells,
    rounds_of,
    server_starts,
)
from trtbench.profiling.loadtest.workload.repeats import tier_passes
from trtbench.profiling.loadtest.workload.schedule import Tier

TIERS = [Tier(concurrency=c) for c in (1, 2, 4, 8)]
LABELS = [t.label for t in TIERS]  # c1, c2, c4, c8
VARIANTS = ["base", "draft", "medusa"]


def runs(keys: list[object]) -> list[object]:
    """The keys of the maximal runs of equal neighbours: [a, a, b, a] -> [a, b, a]."""
    return [k for k, _ in groupby(keys)]


def contiguous(keys: list[object]) -> bool:
    """Every key occupies one unbroken stretch of ``keys``."""
    return len(runs(keys)) == len(set(keys))


def in_round(cells: list[Cell], r: int) -> list[Cell]:
    return [c for c in cells if c.round == r]


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("rounds", [1, 3])
def test_every_cell_once_per_round_positions_in_order(design, rounds):
    cells = plan_cells(design, VARIANTS, TIERS, rounds, seed=7)
    seen = Counter((c.round, c.variant, c.tier.label) for c in cells)
    # 3 variants x 4 tiers x rounds, each exactly once
    assert set(seen) == set(product(range(rounds), VARIANTS, LABELS))
    assert set(seen.values()) == {1}
    assert len(cells) == 3 * 4 * rounds
    assert [c.position for c in cells] == list(range(len(cells)))
    # tier_index is the tier's place in the spec's tier list
    assert all(TIERS[c.tier_index] == c.tier for c in cells)


@pytest.mark.parametrize("rounds", [1, 4])
def test_interleaved_keeps_the_variants_of_a_tier_back_to_back(rounds):
    cells = plan_cells(INTERLEAVED, VARIANTS, TIERS, rounds, seed=3)
    # the rounds come one after another
    assert [c.round for c in cells] == sorted(c.round for c in cells)
    for r in range(rounds):
        here = in_round(cells, r)
        tiers = [c.tier.label for c in here]
        assert contiguous(tiers), tiers
        # each stretch holds every variant once: 4 stretches of 3 cells
        for label in LABELS:
            assert sorted(c.variant for c in here if c.tier.label == label) == sorted(
                VARIANTS
            )


def tier_orders(cells: list[Cell], rounds: int) -> list[list[str]]:
    return [runs([c.tier.label for c in in_round(cells, r)]) for r in range(rounds)]


def variant_orders(cells: list[Cell], rounds: int) -> list[dict[str, list[str]]]:
    """Per round: tier -> its variants in the order they ran."""
    out = []
    for r in range(rounds):
        order: dict[str, list[str]] = {}
        for c in in_round(cells, r):
            order.setdefault(c.tier.label, []).append(c.variant)
        out.append(order)
    return out


def test_interleaved_shuffles_tiers_and_variants_between_rounds():
    """With 4 tiers (24 orders) and 3 variants (6 orders) over 5 rounds, an order that never
    changes between rounds is the mark of no shuffle: with a shuffle, five equal draws in a
    row have probability (1/24)^4 for the tiers, so some seed among 0..4 shows a change."""
    rounds = 5
    tier_changed = variant_changed = False
    for seed in range(5):
        cells = plan_cells(INTERLEAVED, VARIANTS, TIERS, rounds, seed)
        orders = tier_orders(cells, rounds)
        tier_changed |= any(o != orders[0] for o in orders)
        per_round = variant_orders(cells, rounds)
        variant_changed |= any(
            per_round[r][t] != per_round[0][t] for r in range(rounds) for t in LABELS
        )
        # the variants of one tier are not always in spec order either
        variant_changed |= any(
            per_round[r][t] != VARIANTS for r in range(rounds) for t in LABELS
        )
    assert tier_changed
    assert variant_changed


@pytest.mark.parametrize("design", DESIGNS)
def test_the_same_seed_gives_the_same_order(design):
    first = plan_cells(design, VARIANTS, TIERS, 3, seed=11)
    again = plan_cells(design, VARIANTS, TIERS, 3, seed=11)
    assert first == again


@pytest.mark.parametrize("design", [INTERLEAVED, ROUNDS, SEQUENTIAL])
def test_another_seed_gives_another_order(design):
    """3 variants x 4 tiers x 3 rounds: two shuffled plans agree only by chance (the
    least shuffled, sequential, fixes pass 0 and draws passes 1 and 2 from seed + 1 and
    seed + 2, one of 24 orders each: equal with probability about 1/576)."""
    a = order_json(plan_cells(design, VARIANTS, TIERS, 3, seed=11))
    b = order_json(plan_cells(design, VARIANTS, TIERS, 3, seed=2024))
    assert sorted(map(tuple, a)) == sorted(map(tuple, b))  # the same cells ...
    assert a != b  # ... in another order


@pytest.mark.parametrize("rounds", [1, 3])
def test_rounds_serves_one_variant_at_a_time_within_a_round(rounds):
    cells = plan_cells(ROUNDS, VARIANTS, TIERS, rounds, seed=5)
    assert [c.round for c in cells] == sorted(c.round for c in cells)
    for r in range(rounds):
        here = in_round(cells, r)
        assert contiguous([c.variant for c in here])
        assert sorted(runs([c.variant for c in here])) == sorted(VARIANTS)


def test_rounds_shuffles_the_variants_between_rounds():
    """6 orders of 3 variants; 5 rounds for each of seeds 0..4: an unchanging order means no
    shuffle (probability (1/6)^4 per seed with one)."""
    changed = False
    for seed in range(5):
        cells = plan_cells(ROUNDS, VARIANTS, TIERS, 5, seed)
        orders = [runs([c.variant for c in in_round(cells, r)]) for r in range(5)]
        changed |= any(o != orders[0] for o in orders)
    assert changed


def test_rounds_of_gives_each_round_of_a_variant_in_run_order():
    cells = plan_cells(ROUNDS, VARIANTS, TIERS, 3, seed=5)
    for variant in VARIANTS:
        by_round = rounds_of(cells, variant)
        assert sorted(by_round) == [0, 1, 2]
        for r, mine in by_round.items():
            assert {c.variant for c in mine} == {variant}
            assert {c.round for c in mine} == {r}
            assert sorted(c.tier.label for c in mine) == sorted(LABELS)
            positions = [c.position for c in mine]
            # in run order, and (the rounds design) one unbroken stretch: one server start
            assert positions == list(range(positions[0], positions[0] + len(TIERS)))
    assert rounds_of(cells, "absent") == {}


@pytest.mark.parametrize("rounds", [1, 3])
def test_sequential_runs_each_variant_in_spec_order_over_tier_passes(rounds):
    seed = 9
    cells = plan_cells(SEQUENTIAL, VARIANTS, TIERS, rounds, seed)
    names = [c.variant for c in cells]
    assert contiguous(names)
    assert runs(names) == VARIANTS
    passes = [(p.repeat, p.index) for p in tier_passes(TIERS, rounds, seed)]
    for variant in VARIANTS:
        mine = [c for c in cells if c.variant == variant]
        assert [(c.round, c.tier_index) for c in mine] == passes
        # pass 0 in the tier order given (tier_passes' definition)
        assert [c.tier.label for c in mine[: len(TIERS)]] == LABELS
        assert {c.round for c in mine[: len(TIERS)]} == {0}


# A follow-up: "draft" was best at c1 and c4 only, "medusa" at c8; base runs every tier.
TIERS_OF = {"base": LABELS, "draft": ["c1", "c4"], "medusa": ["c8"]}
EXPECTED = {("base", t) for t in LABELS} | {
    ("draft", "c1"),
    ("draft", "c4"),
    ("medusa", "c8"),
}  # 4 + 2 + 1 = 7 cells per round


@pytest.mark.parametrize("design", DESIGNS)
def test_tiers_of_restricts_each_variant_to_its_tiers(design):
    cells = plan_cells(design, VARIANTS, TIERS, 3, seed=1, tiers_of=TIERS_OF)
    assert len(cells) == 7 * 3
    assert [c.position for c in cells] == list(range(21))
    for r in range(3):
        here = [(c.variant, c.tier.label) for c in in_round(cells, r)]
        assert sorted(here) == sorted(EXPECTED)
    if design == INTERLEAVED:  # a tier's variants still back to back
        for r in range(3):
            assert contiguous([c.tier.label for c in in_round(cells, r)])
    if design == ROUNDS:  # a variant's tiers still in one stretch per round
        for r in range(3):
            assert contiguous([c.variant for c in in_round(cells, r)])
    if design == SEQUENTIAL:  # tier_passes' order, less the tiers a variant skips
        assert runs([c.variant for c in cells]) == VARIANTS
        for variant, labels in TIERS_OF.items():
            expected = [
                (p.repeat, p.tier.label)
                for p in tier_passes(TIERS, 3, 1)
                if p.tier.label in labels
            ]
            mine = [(c.round, c.tier.label) for c in cells if c.variant == variant]
            assert mine == expected


@pytest.mark.parametrize(
    ("design", "rounds", "variants", "tiers"),
    [
        ("alternating", 3, VARIANTS, TIERS),
        ("", 3, VARIANTS, TIERS),
        (INTERLEAVED, 0, VARIANTS, TIERS),
        (ROUNDS, 0, VARIANTS, TIERS),
        (SEQUENTIAL, 0, VARIANTS, TIERS),
        (INTERLEAVED, -1, VARIANTS, TIERS),
        (ROUNDS, 2, [], TIERS),
        (SEQUENTIAL, 2, VARIANTS, []),
    ],
)
def test_bad_plans_are_refused(design, rounds, variants, tiers):
    with pytest.raises(ValueError):
        plan_cells(design, variants, tiers, rounds, seed=0)


def test_unknown_design_is_named():
    with pytest.raises(ValueError, match="alternating"):
        plan_cells("alternating", VARIANTS, TIERS, 3, seed=0)


@pytest.mark.parametrize(
    ("design", "variants", "rounds", "expected"),
    [
        (ROUNDS, 3, 4, 12),  # restarted every round: 3 x 4
        (ROUNDS, 2, 1, 2),
        (INTERLEAVED, 3, 4, 3),  # all up at once, once each
        (SEQUENTIAL, 3, 4, 3),  # each variant served once
    ],
)
def test_server_starts(design, variants, rounds, expected):
    assert server_starts(design, variants, rounds) == expected


def test_order_json_is_round_tier_label_variant():
    cells = [
        Cell(0, 0, 2, Tier(concurrency=4), "draft"),
        Cell(1, 0, 0, Tier(request_rate_per_s=2.5), "base"),
        Cell(2, 1, 2, Tier(concurrency=4), "base"),
    ]
    assert order_json(cells) == [
        [0, "c4", "draft"],
        [0, "r2.5", "base"],
        [1, "c4", "base"],
    ]


@pytest.mark.parametrize("design", DESIGNS)
def test_order_json_of_a_plan_follows_its_cells_and_is_json(design):
    cells = plan_cells(design, VARIANTS, TIERS, 2, seed=4)
    doc = order_json(cells)
    assert doc == [[c.round, c.tier.label, c.variant] for c in cells]
    assert json.loads(json.dumps(doc)) == doc  # plain ints and strings for run.json
